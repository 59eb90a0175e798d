"""Random oracle checkpoints in the RELEASED layout: tensor draw (``build``) and shard writing.

Shared by oracle-fixtures/tiny-k3/make_tiny.py and oracle-fixtures/mini-k3-93/make_mini.py. The draw
order of ``build`` is part of every fixture's bytes: changing it changes every checked-in checkpoint.

Adversarial choices (each keeps one plausible wrong implementation visible, see docs/formats.md §7.5):
  A_log differs per head and the padding is zero (per-channel reading changes the decay);
  MLA LoRA activations have mean square ~1e-5 (LoRA-norm eps 1e-6 vs 1e-5 matters) while the
  rope slot of kv_a is O(1) (dropping it matters); the router bias is comparable to the sigmoid
  spread (it reorders the top-k); the routed experts' latent outputs are small (mean square of the
  weighted sum ~1e-5, comparable to rms_norm_eps: renorm and routed_scaling_factor stay visible through
  the scale-invariant latent RMSNorm); AttnRes projections give non-uniform mixes; norm gains ~1, not 1;
  MXFP4 scale bytes mostly 116-125 with a few 110-113 and 126-127.
"""
from __future__ import annotations

import hashlib
import json
import os

import torch

from . import ops
from .model import LM_HEAD, PREFIX
from .safetensors_io import bf16_round, tensor_bytes, write_file

W2_STD = 4e-4
PROJ_STD = 0.08  # AttnRes scoring vectors: non-uniform mixes, but not a chaotic amplifier of rounding
DTYPE_RANK = {"F64": 0, "F32": 1, "BF16": 2, "F16": 3, "U8": 4}


def build(cfg, seed, w2_std=W2_STD, proj_std=PROJ_STD, gate_std=0.15, bias_spacing=None, kda_o_gain=1.0):
    """Ordered {name: (dtype, tensor)} of a random K3 for cfg; float tensors are already rounded to
    their stored dtype. Deterministic from seed (one torch.Generator, fixed draw order).

    Deep-stack knobs (the defaults are the tiny oracle's): gate_std = router gate weight std (with
    bias_spacing it sets how much the sigmoid scores vary by token); bias_spacing = None draws the
    router bias as N(0, 0.3), else the same draw is replaced by its ranks x bias_spacing (centred), so
    the biased selection scores keep gaps of about bias_spacing minus the token variation;
    kda_o_gain scales the KDA o_proj std (the KDA output is the main amplifier of float32 rounding
    over a 93-layer random stack)."""
    g = torch.Generator().manual_seed(seed)

    def randn(*shape, std=1.0):
        return torch.randn(*shape, generator=g, dtype=torch.float64) * std

    def gain(n, spread=0.1):
        return 1.0 + randn(n, std=spread)

    c = cfg
    E, V = c.hidden, c.vocab
    T = {}

    def put(name, dt, t):
        if dt == "BF16":
            t = bf16_round(t)
        elif dt == "F32":
            t = t.to(torch.float32).to(torch.float64)
        T[name] = (dt, t)

    put(PREFIX + "embed_tokens.weight", "BF16", randn(V, E))
    H, D = c.kda_heads, c.kda_head_dim
    P = H * D
    Hm, qn, qr, vh = c.n_heads, c.qk_nope, c.qk_rope, c.v_head
    for i in range(c.n_layers):
        p = f"{PREFIX}layers.{i}."
        put(p + "input_layernorm.weight", "BF16", gain(E))
        put(p + "post_attention_layernorm.weight", "BF16", gain(E))
        put(p + "self_attention_res_norm.weight", "BF16", gain(E, 0.2))
        put(p + "self_attention_res_proj.weight", "BF16", randn(1, E, std=proj_std))
        put(p + "mlp_res_norm.weight", "BF16", gain(E, 0.2))
        put(p + "mlp_res_proj.weight", "BF16", randn(1, E, std=proj_std))
        a = p + "self_attn."
        if c.is_mla(i):
            lora_std = 3e-3 / E ** 0.5  # LoRA activations rms ~3e-3: mean square ~1e-5, comparable to eps
            put(a + "q_a_proj.weight", "BF16", randn(c.q_lora, E, std=lora_std))
            put(a + "q_a_layernorm.weight", "BF16", gain(c.q_lora))
            put(a + "q_b_proj.weight", "BF16", randn(Hm * (qn + qr), c.q_lora, std=1.2 / c.q_lora ** 0.5))
            kva = torch.cat([randn(c.kv_lora, E, std=lora_std), randn(qr, E, std=1.0 / E ** 0.5)], 0)
            put(a + "kv_a_proj_with_mqa.weight", "BF16", kva)
            put(a + "kv_a_layernorm.weight", "BF16", gain(c.kv_lora))
            put(a + "kv_b_proj.weight", "BF16", randn(Hm * (qn + vh), c.kv_lora, std=1.0 / c.kv_lora ** 0.5))
            put(a + "o_proj.weight", "BF16", randn(E, Hm * vh, std=1.0 / (Hm * vh) ** 0.5))
            put(a + "g_proj.weight", "BF16", randn(Hm * vh, E, std=1.0 / E ** 0.5))
        else:
            for n in ("q_proj", "k_proj", "v_proj"):
                put(a + n + ".weight", "BF16", randn(P, E, std=1.0 / E ** 0.5))
            for n in ("q_conv1d", "k_conv1d", "v_conv1d"):
                w = randn(P, 1, c.conv_k, std=0.35)
                w[:, :, -1] += 0.6  # the current-token tap dominates, the older taps still count
                put(a + n + ".weight", "BF16", w)
            put(a + "f_a_proj.weight", "BF16", randn(D, E, std=1.0 / E ** 0.5))
            put(a + "f_b_proj.weight", "BF16", randn(P, D, std=1.0 / D ** 0.5))
            put(a + "b_proj.weight", "BF16", randn(H, E, std=1.0 / E ** 0.5))
            alog = torch.zeros(D, dtype=torch.float64)  # padded like the release's [128] with 96 used
            alog[:H] = torch.linspace(-0.8, 1.2, H, dtype=torch.float64) + randn(H, std=0.1)
            put(a + "A_log", "F32", alog)
            put(a + "dt_bias", "F32", randn(P, std=0.5))
            put(a + "g_proj.weight", "BF16", randn(P, E, std=1.0 / E ** 0.5))
            put(a + "o_norm.weight", "BF16", gain(D))
            put(a + "o_proj.weight", "BF16", randn(E, P, std=kda_o_gain / P ** 0.5))
        if c.is_moe(i):
            m = p + "block_sparse_moe."
            Lt, I, N = c.latent, c.moe_inter, c.n_experts
            SI = I * c.n_shared
            put(m + "gate.weight", "BF16", randn(N, E, std=gate_std))
            bias = randn(N, std=0.3)  # selection-only bias as wide as the sigmoid spread
            if bias_spacing is not None:
                bias = (torch.argsort(torch.argsort(bias)).to(torch.float64) - (N - 1) / 2) * bias_spacing
            put(m + "gate.e_score_correction_bias", "F32", bias)
            put(m + "routed_expert_down_proj.weight", "BF16", randn(Lt, E, std=1.0 / E ** 0.5))
            put(m + "routed_expert_up_proj.weight", "BF16", randn(E, Lt, std=0.8 / Lt ** 0.5))
            put(m + "routed_expert_norm.weight", "BF16", gain(Lt))
            put(m + "shared_experts.gate_proj.weight", "BF16", randn(SI, E, std=1.0 / E ** 0.5))
            put(m + "shared_experts.up_proj.weight", "BF16", randn(SI, E, std=1.0 / E ** 0.5))
            put(m + "shared_experts.down_proj.weight", "BF16", randn(E, SI, std=0.6 / SI ** 0.5))
            for e in range(N):
                for w, rows, cols in (("w1", I, Lt), ("w3", I, Lt), ("w2", Lt, I)):
                    # w2 small: the weighted latent sum has mean square ~1e-5, comparable to rms_norm_eps,
                    # so the renormalisation and routed_scaling_factor stay visible through the latent norm
                    dense = randn(rows, cols, std=w2_std if w == "w2" else 1.0 / cols ** 0.5)
                    # per-group magnitude spread so the E8M0 bytes cover a realistic range
                    ng = cols // 32
                    u = torch.rand(rows, ng, generator=g, dtype=torch.float64)
                    f = torch.pow(2.0, -3.0 + 4.0 * torch.rand(rows, ng, generator=g, dtype=torch.float64))
                    f = torch.where(u < 0.02, torch.full_like(f, 2.0 ** -8), f)
                    f = torch.where(u > 0.99, torch.full_like(f, 2.0 ** 2.5), f)
                    dense = dense * f.repeat_interleave(32, dim=1)
                    packed, scales = ops.mxfp4_quantize(dense)
                    T[f"{m}experts.{e}.{w}.weight_packed"] = ("U8", packed)
                    T[f"{m}experts.{e}.{w}.weight_scale"] = ("U8", scales)
        else:
            put(p + "mlp.gate_proj.weight", "BF16", randn(c.dense_inter, E, std=1.0 / E ** 0.5))
            put(p + "mlp.up_proj.weight", "BF16", randn(c.dense_inter, E, std=1.0 / E ** 0.5))
            put(p + "mlp.down_proj.weight", "BF16", randn(E, c.dense_inter, std=0.6 / c.dense_inter ** 0.5))
    put(PREFIX + "norm.weight", "BF16", gain(E))
    put(PREFIX + "output_attn_res_norm.weight", "BF16", gain(E, 0.2))
    put(PREFIX + "output_attn_res_proj.weight", "BF16", randn(1, E, std=proj_std))
    put(LM_HEAD, "BF16", randn(V, E, std=3.0 / E ** 0.5))
    return T


def by_dtype_then_name(T, names):
    """The safetensors writer's order: data sorted by dtype, then by name."""
    return sorted(names, key=lambda n: (DTYPE_RANK[T[n][0]], n))


def write_shards(out_dir, T, shards):
    """shards: list of name lists, each in its data order. Writes model-0000s-of-0000n.safetensors and
    model.safetensors.index.json; returns the weight map."""
    listed = [n for names in shards for n in names]
    if len(listed) != len(T) or set(listed) != set(T):
        raise ValueError("the shard layout must place every tensor exactly once")
    weight_map, total = {}, 0
    for s, names in enumerate(shards):
        fname = f"model-{s + 1:05d}-of-{len(shards):05d}.safetensors"
        items = []
        for n in names:
            dt, t = T[n]
            b = tensor_bytes(t, dt)
            items.append((n, dt, list(t.shape), b))
            weight_map[n] = fname
            total += len(b)
        write_file(os.path.join(out_dir, fname), items, metadata={"format": "pt"})
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")
    return weight_map


def file_entries(out_dir):
    """size + sha256 of every shard, config.json and the index in out_dir (name order)."""
    files = []
    for n in sorted(os.listdir(out_dir)):
        if n.endswith(".safetensors") or n in ("config.json", "model.safetensors.index.json"):
            with open(os.path.join(out_dir, n), "rb") as f:
                b = f.read()
            files.append({"file": n, "size": len(b), "sha256": hashlib.sha256(b).hexdigest()})
    return files


def write_manifest(out_dir, fields):
    """manifest.json = fields + files[] (size, sha256 of every file written above)."""
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(dict(fields, files=file_entries(out_dir)), f, indent=1)
        f.write("\n")


def search_seeds(config_path, write, prompt, n_gen, lo, hi, prefix="k3fixture-"):
    """Writes the checkpoint of every seed in [lo, hi) to a temporary directory and prints its
    robustness figures (k3ref.metrics.score_checkpoint); writes nothing beside the generator."""
    import shutil
    import tempfile

    from .metrics import score_checkpoint
    for seed in range(lo, hi):
        d = tempfile.mkdtemp(prefix=prefix)
        try:
            shutil.copy(config_path, d)
            write(d, seed)
            s = score_checkpoint(d, prompt, n_gen)
            print(f"seed {seed}: " + " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                                             for k, v in s.items()), flush=True)
        finally:
            shutil.rmtree(d)


def main(argv, here, name, write, seed, prompt, n_gen):
    """A generator's command line: no argument writes the checkpoint for seed into ``here`` (beside
    its config.json); ``--search LO HI`` scores seeds LO..HI-1 and writes nothing there.
    write(out_dir, cfg, seed) writes one checkpoint."""
    from .model import Config
    config_path = os.path.join(here, "config.json")
    cfg = Config.load(config_path)
    if len(argv) >= 1 and argv[0] == "--search":
        if len(argv) != 3:
            raise SystemExit("usage: --search LO HI")
        search_seeds(config_path, lambda d, s: write(d, cfg, s), prompt, n_gen, int(argv[1]), int(argv[2]),
                     prefix=name + "-")
        return
    write(here, cfg, seed)
    print(f"wrote {name} checkpoint (seed {seed}) to {here}")

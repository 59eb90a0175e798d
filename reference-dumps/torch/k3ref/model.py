"""Kimi K3 text forward from a checkpoint directory in the RELEASED layout (docs/semantics.md §1.4, §2.5, §4.1).

- config.json nested (text_config + linear_attn_config) or flat; every field required.
- tensors under ``language_model.model.`` plus ``language_model.lm_head.weight``; routed experts as
  MXFP4 U8 ``weight_packed`` / ``weight_scale``; dtypes taken from the headers.
- tensors are read lazily by header offset (one layer at a time; only the experts the router picks).
- full forward over T tokens and incremental decode (KDA recurrent + conv state, MLA expanded K/V
  cache carried in a state object); float64 by default, float32 to measure drift.
"""
from __future__ import annotations

import json
import os

import numpy as np
import torch

from . import ops
from .safetensors_io import TensorInfo, decode, index_file, read_raw

PREFIX = "language_model.model."
LM_HEAD = "language_model.lm_head.weight"


class ConfigError(ValueError):
    pass


class Config:
    """The fields the forward needs. Lookup order (§1.2): text_config, linear_attn_config, root."""

    FIELDS = [  # attribute, primary key, alias, type
        ("hidden", "hidden_size", None, int), ("n_layers", "num_hidden_layers", None, int),
        ("vocab", "vocab_size", None, int), ("rms_eps", "rms_norm_eps", None, float),
        ("kda_heads", "num_heads", "kda_num_heads", int), ("kda_head_dim", "head_dim", "kda_head_dim", int),
        ("conv_k", "short_conv_kernel_size", None, int), ("gate_lb", "gate_lower_bound", None, float),
        ("n_heads", "num_attention_heads", None, int), ("q_lora", "q_lora_rank", None, int),
        ("kv_lora", "kv_lora_rank", None, int), ("qk_nope", "qk_nope_head_dim", None, int),
        ("qk_rope", "qk_rope_head_dim", None, int), ("v_head", "v_head_dim", None, int),
        ("n_experts", "num_experts", None, int), ("topk", "num_experts_per_token", None, int),
        ("n_shared", "num_shared_experts", None, int), ("latent", "routed_expert_hidden_size", None, int),
        ("moe_inter", "moe_intermediate_size", None, int), ("routed_scale", "routed_scaling_factor", None, float),
        ("first_dense", "first_k_dense_replace", None, int), ("dense_inter", "intermediate_size", None, int),
        ("attn_res_block", "attn_res_block_size", None, int),
        ("situ_b1", "activation_situ_beta", "situ_beta", float),
        ("situ_b2", "activation_situ_linear_beta", "situ_linear_beta", float),
    ]
    BOOLS = [("mla_out_gate", "mla_use_output_gate"), ("moe_renorm", "moe_renormalize"),
             ("latent_norm", "latent_moe_use_norm")]

    def __init__(self, raw, source="config"):
        self.raw = raw
        tc = raw.get("text_config")
        lac = (tc if tc is not None else raw).get("linear_attn_config")
        objs = [o for o in (tc, lac, raw) if isinstance(o, dict)]

        def look(primary, alias):
            for o in objs:
                for k in (primary, alias):
                    if k is not None and k in o:
                        return o[k]
            return None

        missing = []
        for attr, key, alias, typ in self.FIELDS:
            v = look(key, alias)
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                missing.append(key)
                continue
            setattr(self, attr, typ(v))
        for attr, key in self.BOOLS:
            v = look(key, None)
            setattr(self, attr, True if v is None else bool(v))
        fal = look("full_attn_layers", None)
        if not isinstance(fal, list) or not fal:
            missing.append("full_attn_layers")
        if missing:
            raise ConfigError(f"{source} is missing {len(missing)} required field(s): {', '.join(missing)}")
        self.full_attn_layers = [int(v) for v in fal]
        for j, v in enumerate(self.full_attn_layers):
            if not 1 <= v <= self.n_layers:
                raise ConfigError(f"full_attn_layers[{j}] = {v} is outside 1..{self.n_layers} (the list is ONE-based)")

    @classmethod
    def load(cls, path):
        with open(path) as f:
            return cls(json.load(f), path)

    def is_mla(self, i, mut=()):
        """§1.4: 0-based layer i is MLA iff (i+1) is in the ONE-based full_attn_layers."""
        return (i if "layer_map_zero_based" in mut else i + 1) in self.full_attn_layers

    def is_moe(self, i):
        return i >= self.first_dense

    def layer_map(self, mut=()):
        return "".join("M" if self.is_mla(i, mut) else "K" for i in range(self.n_layers))


class Checkpoint:
    """All ``*.safetensors`` of a directory (sorted byte-wise), indexed by name; reads by offset."""

    def __init__(self, model_dir):
        self.dir = model_dir
        self.shards = sorted(os.path.join(model_dir, n) for n in os.listdir(model_dir)
                             if n.endswith(".safetensors"))
        if not self.shards:
            raise FileNotFoundError(f"no .safetensors files in {model_dir}")
        self.index = {}
        for s in self.shards:
            for name, info in index_file(s).items():
                if name in self.index:
                    raise ValueError(f"duplicate tensor {name} in {s} and {self.index[name].path}")
                self.index[name] = info

    def info(self, name):
        try:
            return self.index[name]
        except KeyError:
            raise KeyError(f"missing tensor {name}") from None

    def get(self, name, dtype=torch.float64):
        info = self.info(name)
        return decode(info, read_raw(info), dtype)

    def has(self, name):
        return name in self.index


ROWS_CHUNK_ELEMENTS = 1 << 23  # streamed matrices are read ~8M elements (64 MB of float64) at a time


class Rows:
    """A 2-D weight read lazily in chunks of rows: ``ops.linear`` multiplies it chunk by chunk, so a
    streamed model never holds a whole 33792 x 7168 matrix in float64 (1.9 GB)."""

    def __init__(self, model, name):
        self.model, self.name = model, name
        self.shape = tuple(model.ckpt.info(name).shape)

    def linear(self, x):
        rows, cols = self.shape
        step = max(1, ROWS_CHUNK_ELEMENTS // cols)
        return torch.cat([self.model._linear_rows(x, self.name, lo, min(rows, lo + step)) for lo in range(0, rows, step)], -1)


class Model:
    def __init__(self, model_dir, dtype=torch.float64, mut=(), e8m0_255="zero", cache_weights=True):
        self.cfg = Config.load(os.path.join(model_dir, "config.json"))
        self.ckpt = Checkpoint(model_dir)
        self.dtype = dtype
        self.mut = ops._check_mut(mut)
        self.e8m0_255 = e8m0_255
        self.cache_weights = cache_weights
        self._layer_cache = {}
        self._expert_cache = {}
        self._top = None

    # ---- weights ----
    def _get(self, name):
        info = self.ckpt.info(name)
        if not self.cache_weights and len(info.shape) == 2 and info.numel() > ROWS_CHUNK_ELEMENTS:
            return Rows(self, name)
        t = self.ckpt.get(name, self.dtype)
        return t if not t.is_floating_point() else t.to(self.dtype)

    def top(self):
        """Model-level vectors (and, when weights are cached, the embedding and the LM head)."""
        if self._top is None:
            names = {"norm": PREFIX + "norm.weight", "out_res_norm": PREFIX + "output_attn_res_norm.weight",
                     "out_res_proj": PREFIX + "output_attn_res_proj.weight"}
            if self.cache_weights:
                names.update(embed=PREFIX + "embed_tokens.weight", lm_head=LM_HEAD)
            self._top = {k: self._get(v) for k, v in names.items()}
        return self._top

    def _rows(self, name, lo, hi):
        """Rows lo..hi-1 of a 2-D tensor, read by offset (streaming: never the whole matrix)."""
        return self._decode(self._rows_raw(name, lo, hi))

    def _rows_raw(self, name, lo, hi):
        info = self.ckpt.info(name)
        rb = info.nbytes // info.shape[0]
        part = TensorInfo(name, info.path, info.dtype, [hi - lo] + info.shape[1:], info.offset + lo * rb,
                          (hi - lo) * rb)
        return part, read_raw(part)

    def _decode(self, part_raw):
        part, raw = part_raw
        return decode(part, raw, self.dtype).to(self.dtype)

    def _linear_rows(self, x, name, lo, hi):
        """x @ rows[lo:hi].T; rows whose bytes are all zero (a sparse file's hole) give exact zeros unread."""
        part, raw = self._rows_raw(name, lo, hi)
        if len(raw) % 8 == 0 and not np.frombuffer(raw, dtype=np.uint64).any():
            return torch.zeros(*x.shape[:-1], hi - lo, dtype=x.dtype)
        return ops.linear(x, self._decode((part, raw)))

    def embed(self, ids_t):
        if self.cache_weights:
            return self.top()["embed"][ids_t]
        return torch.cat([self._rows(PREFIX + "embed_tokens.weight", i, i + 1) for i in ids_t.tolist()], 0)

    def lm_head(self, hn, chunk=8192):
        if self.cache_weights:
            return ops.linear(hn, self.top()["lm_head"])
        V = self.ckpt.info(LM_HEAD).shape[0]
        return torch.cat([self._linear_rows(hn, LM_HEAD, lo, min(V, lo + chunk)) for lo in range(0, V, chunk)], -1)

    def layer(self, i):
        """{suffix after 'language_model.model.layers.<i>.': tensor} for the non-expert tensors."""
        if i in self._layer_cache:
            return self._layer_cache[i]
        c = self.cfg
        p = f"{PREFIX}layers.{i}."
        names = ["input_layernorm.weight", "post_attention_layernorm.weight", "self_attention_res_norm.weight",
                 "self_attention_res_proj.weight", "mlp_res_norm.weight", "mlp_res_proj.weight"]
        if c.is_mla(i, self.mut):
            names += ["self_attn." + n for n in ("q_a_proj.weight", "q_a_layernorm.weight", "q_b_proj.weight",
                                                  "kv_a_proj_with_mqa.weight", "kv_a_layernorm.weight",
                                                  "kv_b_proj.weight", "o_proj.weight")]
            if c.mla_out_gate:
                names.append("self_attn.g_proj.weight")
        else:
            names += ["self_attn." + n for n in ("q_proj.weight", "k_proj.weight", "v_proj.weight",
                                                  "q_conv1d.weight", "k_conv1d.weight", "v_conv1d.weight",
                                                  "f_a_proj.weight", "f_b_proj.weight", "b_proj.weight", "A_log",
                                                  "dt_bias", "g_proj.weight", "o_norm.weight", "o_proj.weight")]
        if c.is_moe(i):
            names += ["block_sparse_moe." + n for n in (
                "gate.weight", "gate.e_score_correction_bias", "routed_expert_down_proj.weight",
                "routed_expert_up_proj.weight", "routed_expert_norm.weight", "shared_experts.gate_proj.weight",
                "shared_experts.up_proj.weight", "shared_experts.down_proj.weight")]
        else:
            names += ["mlp." + n for n in ("gate_proj.weight", "up_proj.weight", "down_proj.weight")]
        W = {n: self._get(p + n) for n in names}
        if self.cache_weights:
            self._layer_cache[i] = W
        return W

    def expert(self, i, e):
        key = (i, e)
        if key in self._expert_cache:
            return self._expert_cache[key]
        p = f"{PREFIX}layers.{i}.block_sparse_moe.experts.{e}."
        mats = []
        for w in ("w1", "w3", "w2"):
            packed = self.ckpt.get(p + w + ".weight_packed")
            scale = self.ckpt.get(p + w + ".weight_scale")
            if packed.dtype != torch.uint8 or scale.dtype != torch.uint8:
                raise ValueError(f"{p}{w}: MXFP4 tensors must be U8")
            mats.append(ops.mxfp4_dequant(packed, scale, 32, self.e8m0_255, self.mut).to(self.dtype))
        mats = tuple(mats)
        if self.cache_weights:
            self._expert_cache[key] = mats
        return mats

    # ---- forward ----
    def new_state(self):
        return {"pos": 0, "layers": [None] * self.cfg.n_layers}

    def forward(self, ids, state=None, record=None, progress=None):
        """Logits [T, V] for ids (positions state['pos'] ... when a state is given; the state is updated).

        record: a dict that receives every stage (see docs/formats.md §7.2 for the keys).
        progress: called with (layer index, layer count) after each decoder layer.
        """
        lane = self.begin(ids)
        for i in range(self.cfg.n_layers):
            st = state["layers"][i] if state is not None else None
            new_st = self.advance(i, lane, st, record)
            if progress is not None:
                progress(i, self.cfg.n_layers)
            if state is not None:
                state["layers"][i] = new_st
            elif record is not None:
                record.setdefault("_final_state", {})[i] = new_st
        logits = self.finish(lane, record)
        if state is not None:
            state["pos"] += lane["T"]
        return logits

    # A forward in three parts, so a caller can stop after any layer and go on later (dump_checkpoint.py
    # --layers): the lane {"h", "snaps", "T"} is everything that crosses a layer boundary in a full forward
    # from an empty state (the running partial sum and the AttnRes block snapshots).
    def begin(self, ids):
        """The input of layer 0: the embedding rows of ids, no snapshots."""
        self.top()
        ids_t = torch.as_tensor(ids, dtype=torch.long)
        if int(ids_t.min()) < 0 or int(ids_t.max()) >= self.cfg.vocab:
            raise ValueError("token id out of range")
        return {"h": self.embed(ids_t), "snaps": [], "T": len(ids_t)}

    def advance(self, i, lane, st=None, record=None):
        """Runs layer i on the lane (updated in place); returns the layer's final KDA/MLA state."""
        lane["h"], lane["snaps"], new_st = self._layer(i, self.layer(i), lane["h"], lane["snaps"], st, record)
        return new_st

    def finish(self, lane, record=None):
        """The model-level AttnRes mix, the final norm and the LM head after the last layer."""
        c, mut, top = self.cfg, self.mut, self.top()
        h, snaps = lane["h"], lane["snaps"]
        if "no_output_mix" in mut:
            hm = h
        else:
            hm = ops.attn_res_mix(h, snaps, top["out_res_proj"], top["out_res_norm"], c.rms_eps, mut)
        hn = ops.rmsnorm(hm, top["norm"], c.rms_eps)
        logits = self.lm_head(hn)
        if record is not None:
            record["snapshots"] = torch.stack(snaps, 0)
            record["final_in"] = h
            record["final_mix"] = hm
            record["final_norm"] = hn
            record["logits"] = logits
        return logits

    def release(self, i):
        """Drops layer i's cached weights and experts (a layer-by-layer caller is done with it)."""
        self._layer_cache.pop(i, None)
        for key in [k for k in self._expert_cache if k[0] == i]:
            del self._expert_cache[key]

    def _layer(self, i, W, h, snaps, st, rec):
        c, mut = self.cfg, self.mut
        r = {} if rec is not None else None
        partial = h
        if snaps:
            x = ops.attn_res_mix(partial, snaps, W["self_attention_res_proj.weight"],
                                 W["self_attention_res_norm.weight"], c.rms_eps, mut)
        else:
            x = h
        n_snap_attn = len(snaps)
        if i % c.attn_res_block == 0:
            snaps = snaps + [x if "attnres_snapshot_mixed" in mut else partial]
            if "attnres_no_clear" not in mut:
                partial = None
        xn = ops.rmsnorm(x, W["input_layernorm.weight"], c.rms_eps)
        A = {k[len("self_attn."):]: v for k, v in W.items() if k.startswith("self_attn.")}
        if c.is_mla(i, mut):
            a, new_st = ops.mla_layer(xn, A, st, num_heads=c.n_heads, qk_nope=c.qk_nope, qk_rope=c.qk_rope,
                                      v_head=c.v_head, rms_eps=c.rms_eps, out_gate=c.mla_out_gate, mut=mut)
        else:
            a, new_st = ops.kda_layer(xn, A, st, num_heads=c.kda_heads, head_dim=c.kda_head_dim,
                                      lower_bound=c.gate_lb, rms_eps=c.rms_eps, mut=mut)
        partial = a if partial is None else partial + a
        y = ops.attn_res_mix(partial, snaps, W["mlp_res_proj.weight"], W["mlp_res_norm.weight"], c.rms_eps, mut)
        yn = ops.rmsnorm(y, W["post_attention_layernorm.weight"], c.rms_eps)
        if c.is_moe(i):
            M = {k[len("block_sparse_moe."):]: v for k, v in W.items() if k.startswith("block_sparse_moe.")}
            mt = {} if r is not None else None
            f, idx, wts = ops.latent_moe(yn, M, lambda e: self.expert(i, e), top_k=c.topk, renorm=c.moe_renorm,
                                         scale=c.routed_scale, rms_eps=c.rms_eps, b1=c.situ_b1, b2=c.situ_b2,
                                         latent_norm=c.latent_norm, mut=mut, trace=mt)
        else:
            f = ops.dense_mlp(yn, {k[len("mlp."):]: v for k, v in W.items() if k.startswith("mlp.")},
                              c.situ_b1, c.situ_b2, mut)
        out = partial + f
        if r is not None:
            r.update(partial_in=h, attn_in=x, attn_norm=xn, attn_out=a, partial_attn=partial, mlp_in=y,
                     mlp_norm=yn, mlp_out=f, partial_out=out)
            r["n_snapshots_attn"] = n_snap_attn
            r["n_snapshots_mlp"] = len(snaps)
            if c.is_moe(i):
                r.update(moe_idx=idx, moe_weight=wts, moe_choice=mt["choice"])
            for k, v in r.items():
                rec[f"layers.{i}.{k}"] = v
        return out, snaps, new_st

    def run_layer(self, i, h, snaps, st=None, record=None):
        """One decoder layer from given inputs (the dump's partial_in and the snapshots it saw)."""
        return self._layer(i, self.layer(i), h, list(snaps), st, record)


def greedy(model, prompt, n_gen, incremental=True):
    """Greedy ids (argmax, first maximal index wins). Returns (generated ids, per-step logits rows)."""
    ids = list(prompt)
    rows = []
    if incremental:
        state = model.new_state()
        logits = model.forward(ids, state)
        for step in range(n_gen):
            row = logits[-1]
            rows.append(row)
            nxt = int(torch.argmax(row))
            ids.append(nxt)
            if step + 1 < n_gen:
                logits = model.forward([nxt], state)
    else:
        for step in range(n_gen):
            row = model.forward(ids)[-1]
            rows.append(row)
            ids.append(int(torch.argmax(row)))
    return ids[len(prompt):], rows

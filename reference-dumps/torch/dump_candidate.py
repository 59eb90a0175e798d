#!/usr/bin/python3
"""Candidate dumps from the torch reference (format: docs/formats.md §9).

  /usr/bin/python3 reference-dumps/torch/dump_candidate.py REFERENCE_DUMP --out DIR
      [--model MODEL_DIR] [--mutant NAME | --all-mutants] [--dtype float32|float64] [--lossy bf16|int8|int4]

A candidate is what an engine computes: every layer run ALONE from the reference dump's own inputs
(docs/formats.md §7.6), its teacher-forced logits over the reference's ids and its greedy ids. This script
writes the torch reference itself as such an engine: in float32 (a correct port, judged by the
rounding budget) or running one of its named mutants (ops.MUTANTS: a plausible wrong port).

With --mutant the manifest also records where the mutant first ACTS: the first layer and stage (in
the order the comparison reads them) whose value differs at all from the same torch code without the
mutant, both in float64; model-level mutants act on the logits, bind-level ones on the first layer
that cannot bind. --all-mutants writes DIR/float32 and DIR/<mutant> for every mutant (the mutants
without incremental logits and greedy ids: their full-recompute logits already fail), and beside them logits-float32.npy
([T, V]) and logits-<mutant>.npy (the last prompt row) for k3 compare-logits.

--lossy writes a quantised port with its incremental logits and greedy ids, for the graded verdicts (k3 conform --candidate --lossy): every 2-D trunk
matrix (not the routed experts, already MXFP4; not the router or the short convolutions, which ports keep
exact) fake-quantised symmetrically per group of 32 inputs to int8 or int4 (absmax scale, round to nearest),
or, for bf16, every such matrix and every matmul's input and output rounded to bfloat16. --all-mutants
also writes the lossy ladder DIR/bf16, DIR/int8, DIR/int4, an int4 port that also has a binding
mutant (DIR/int4-misbound: layer 45's o_proj bound from layer 46), that binding mutant alone in float32
(DIR/misbound), two noise ports (DIR/noise-logits, DIR/noise-stages: Gaussian noise of sigma 0.05 on the float32
candidate's logits, or on every stage and the logits), and one-file copies (reference-dumps/candidate_file.py) of a few
candidates: DIR/<name>.safetensors and DIR/<name>.npz.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from dump_checkpoint import Writer, rel, repo_root  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import candidate_file  # noqa: E402
from k3ref import ops  # noqa: E402
from k3ref.model import Model, greedy  # noqa: E402

FORMAT_VERSION = 1
# the per-layer arrays a candidate holds, in the order the comparison reads them (docs/formats.md §9)
STAGES = ["attn_in", "attn_norm", "attn_out", "partial_attn", "mlp_in", "mlp_norm", "mlp_out", "partial_out"]
MOE = ["moe_idx", "moe_weight"]
DTYPES = {"float32": torch.float32, "float64": torch.float64}
LOSSY = {"bf16": "trunk matrices and matmul activations in bfloat16",
         "int8": "trunk matrices int8, symmetric per group of 32",
         "int4": "trunk matrices int4, symmetric per group of 32"}
GROUP = 32
ONE_FILE = ["float32", "mla_lora_config_eps", "layer_map_zero_based", "int4"]  # --all-mutants: also as .safetensors / .npz


def fake_quant(w, bits):
    """w rounded to a symmetric grid of 2^(bits-1)-1 steps per group of GROUP inputs (absmax scale; the last group may be short)."""
    q = 2 ** (bits - 1) - 1
    out = torch.empty_like(w)
    for lo in range(0, w.shape[-1], GROUP):
        g = w[..., lo:lo + GROUP]
        s = g.abs().amax(dim=-1, keepdim=True) / q
        s = torch.where(s == 0, torch.ones_like(s), s)
        out[..., lo:lo + GROUP] = torch.clamp(torch.round(g / s), -q, q) * s
    return out


def bf16(t):
    return t.to(torch.bfloat16).to(t.dtype)


# a binding mutant of ONE layer: its attention output projection bound from the next layer of the same kind
# (what a port's tensor-name mapping off by one layer does); layer 45 is a KDA layer in the middle of the stack
MISBOUND = {"layer": 45, "from": 46, "tensor": "self_attn.o_proj.weight"}


class LossyModel(Model):
    """The reference with its trunk matrices quantised (a GGUF / MLX / int4 port, simulated in float32)."""

    def __init__(self, model_dir, dtype, mut, lossy, misbound=False):
        super().__init__(model_dir, dtype, mut=mut)
        self.lossy = lossy
        self.misbound = misbound

    def layer(self, i):
        W = super().layer(i)
        if self.misbound and i == MISBOUND["layer"]:
            W = dict(W)
            W[MISBOUND["tensor"]] = super().layer(MISBOUND["from"])[MISBOUND["tensor"]]
        return W

    def _get(self, name):
        t = super()._get(name)
        if not self.lossy or not isinstance(t, torch.Tensor) or not t.is_floating_point() or t.dim() != 2 or name.endswith("gate.weight") or "conv1d" in name:
            return t
        return bf16(t) if self.lossy == "bf16" else fake_quant(t, 8 if self.lossy == "int8" else 4)


# noise ports: the float32 candidate with Gaussian noise of this sigma added (seeded), on the logits alone or on every
# layer's stages and the logits: an engine that is imprecise everywhere, which must be called precision, never binding
NOISE = {"noise-logits": ("logits",), "noise-stages": ("layers.", "logits")}
NOISE_SIGMA = 0.05
NOISE_SEED = 20260


def noisy(src_dir, out_dir, name):
    """A copy of the candidate at src_dir with N(0, NOISE_SIGMA) added to its float arrays whose key starts with NOISE[name]."""
    with open(os.path.join(src_dir, "manifest.json")) as f:
        m = json.load(f)
    rng = np.random.default_rng(NOISE_SEED)
    w = Writer(out_dir)
    for key, a in m["arrays"].items():
        v = np.fromfile(os.path.join(src_dir, a["file"]), dtype="<f4" if a["dtype"] == "F32" else "<i4").reshape(a["shape"])
        if a["dtype"] == "F32" and key.startswith(NOISE[name]) and key != "logits_incremental":
            v = (v.astype(np.float64) + rng.normal(0.0, NOISE_SIGMA, v.shape)).astype("<f4")
        if key in ("logits_incremental", "greedy_ids"):
            continue  # the noisy full-recompute logits already fail; no incremental pair to keep consistent
        w.put(key, torch.from_numpy(v.astype(np.float64) if a["dtype"] == "F32" else v.astype(np.int64)))
    m["arrays"] = w.arrays
    m["engine"]["name"] += f", Gaussian noise sigma {NOISE_SIGMA} on " + ("the logits" if name == "noise-logits" else "every stage and the logits")
    m["mutant"] = {"name": name, "wrong": f"N(0, {NOISE_SIGMA}) added to " + ", ".join(NOISE[name]) + " (seed %d)" % NOISE_SEED,
                   "rule": "docs/semantics.md §10.10: precision", "cause": "precision",
                   "acts_at": {"layer": None, "stage": "logits"} if name == "noise-logits" else {"layer": 0, "stage": "attn_in"}}
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(m, f, indent=1)
        f.write("\n")
    print(f"{out_dir}: {m['engine']['name']}")


class Bf16Activations:
    """Every matmul's input and output rounded to bfloat16 (ops.linear is the one matmul of the reference)."""

    def __enter__(self):
        self.linear = ops.linear
        ops.linear = lambda x, w: bf16(self.linear(bf16(x), w))

    def __exit__(self, *exc):
        ops.linear = self.linear


class Reference:
    """The reference dump: manifest (with its sha256) and arrays by key."""

    def __init__(self, path):
        self.dir = path
        with open(os.path.join(path, "manifest.json"), "rb") as f:
            raw = f.read()
        self.sha256 = hashlib.sha256(raw).hexdigest()
        self.m = json.loads(raw)
        if self.m.get("format") != "k3ref-dump":
            raise SystemExit(f"{path} is not a k3ref-dump")

    def array(self, key, dtype):
        a = self.m["arrays"][key]
        np_dt = "<f4" if a["dtype"] == "F32" else "<i4"
        v = np.fromfile(os.path.join(self.dir, a["file"]), dtype=np_dt).reshape(a["shape"])
        return torch.from_numpy(v.astype(np.float64 if np_dt == "<f4" else np.int64)).to(dtype)

    def model_dir(self):
        d = self.m["checkpoint"]["dir"]
        return d if os.path.isabs(d) else os.path.join(repo_root(), d)


def run_layers(ref, model, dtype):
    """{i: record or error string} for every layer run alone from the reference's inputs."""
    snaps_all = ref.array("snapshots", dtype)
    out = {}
    for info in ref.m["layers"]:
        i = info["index"]
        rec = {}
        try:
            model.run_layer(i, ref.array(f"layers.{i}.partial_in", dtype), list(snaps_all[:info["snapshots_attn"]]), None, rec)
        except KeyError as e:  # the wrong implementation asks for a tensor the checkpoint does not hold
            out[i] = str(e).strip("'\"")
            continue
        out[i] = {k[len(f"layers.{i}."):]: v for k, v in rec.items() if k.startswith(f"layers.{i}.")}
    return out


def acts_at(ref, model_dir, mutant, clean):
    """Where the mutant first changes a value (float64 against ``clean``, the float64 model without it): layer, stage."""
    wrong = Model(model_dir, torch.float64, mut={mutant})
    snaps_all = ref.array("snapshots", torch.float64)
    for info in ref.m["layers"]:
        i = info["index"]
        h = ref.array(f"layers.{i}.partial_in", torch.float64)
        snaps = list(snaps_all[:info["snapshots_attn"]])
        a, b = {}, {}
        clean.run_layer(i, h, snaps, None, a)
        try:
            wrong.run_layer(i, h, snaps, None, b)
        except KeyError:
            return {"layer": i, "stage": None, "why": "the layer does not bind"}
        for s in STAGES + (MOE if info["mlp"] == "moe" else []):
            k = f"layers.{i}.{s}"
            if not torch.equal(a[k], b[k]):
                return {"layer": i, "stage": s, "max_abs_change": float((a[k].double() - b[k].double()).abs().max())}
    ids = ref.m["ids"]
    if not torch.equal(clean.forward(ids), wrong.forward(ids)):
        return {"layer": None, "stage": "logits"}
    return None


# the cause (docs/semantics.md §10.10) each planted wrong port must be given: a wrong constant or formula acts on every
# layer of a kind; a tensor bound from another layer is a binding error of that layer alone; a layer map read
# zero-based leaves layers the port cannot bind (missing stage); a model-level mutant shows only in the logits
CAUSE = {"layer_map_zero_based": "missing stage", "no_output_mix": "logits", "o_proj_misbound": "binding error"}


def cause(name):
    return CAUSE.get(name, "wrong constant or formula")


def write(ref, out_dir, dtype_name, mutant=None, clean=None, greedy_ids=True, log=print, lossy=None, misbound=False):
    if lossy == "bf16":
        with Bf16Activations():
            return _write(ref, out_dir, dtype_name, mutant, clean, greedy_ids, log, lossy, misbound)
    return _write(ref, out_dir, dtype_name, mutant, clean, greedy_ids, log, lossy, misbound)


def _write(ref, out_dir, dtype_name, mutant, clean, greedy_ids, log, lossy, misbound):
    dtype = DTYPES[dtype_name]
    model_dir = ref.model_dir()
    mut = {mutant} if mutant else ()
    model = LossyModel(model_dir, dtype, mut, lossy, misbound) if lossy or misbound else Model(model_dir, dtype, mut=mut)
    w = Writer(out_dir)
    layers = []
    for i, rec in sorted(run_layers(ref, model, dtype).items()):
        info = ref.m["layers"][i]
        entry = {"index": i, "mixer": "mla" if model.cfg.is_mla(i, model.mut) else "kda",
                 "mlp": "moe" if model.cfg.is_moe(i) else "dense"}
        if isinstance(rec, str):
            entry["error"] = rec
        else:
            for s in STAGES + (MOE if info["mlp"] == "moe" else []):
                w.put(f"layers.{i}.{s}", rec[s])
        layers.append(entry)
    ids, prompt = ref.m["ids"], ref.m["prompt_ids"]
    notes = {}
    try:
        w.put("logits", model.forward(ids))
        if greedy_ids:
            state = model.new_state()  # the prompt in one step, then one id at a time through the carried state
            rows = [model.forward(ids[:len(prompt)], state)] + [model.forward([t], state) for t in ids[len(prompt):]]
            w.put("logits_incremental", torch.cat(rows, 0))
            gen, _ = greedy(model, prompt, len(ref.m["generated_ids"]), incremental=True)
            w.put("greedy_ids", torch.tensor(gen))
    except KeyError as e:
        notes["logits"] = "not written: " + str(e).strip("'\"")
    manifest = {
        "format": "k3-candidate",
        "format_version": FORMAT_VERSION,
        "engine": {"name": "k3ref (reference-dumps/torch)" + (f", {LOSSY[lossy]}" if lossy else "") + (f", mutant {mutant}" if mutant else ""),
                   "precision": lossy or dtype_name,
                   "generator": {"script": "reference-dumps/torch/dump_candidate.py", "torch": torch.__version__,
                                 "numpy": np.__version__, "python": platform.python_version()}},
        "reference": {"dir": rel(ref.dir), "manifest_sha256": ref.sha256, "ids": ids,
                      "layer_map": ref.m["layer_map"]},
        "layer_inputs": "reference",
        "layers": layers,
        "arrays": w.arrays,
    }
    if notes:
        manifest["notes"] = notes
    if misbound:
        manifest["mutant"] = {"name": "o_proj_misbound", "wrong": f"layer {MISBOUND['layer']}'s {MISBOUND['tensor']} is layer {MISBOUND['from']}'s",
                              "rule": "docs/semantics.md: every layer binds its own tensors", "cause": cause("o_proj_misbound"), "acts_at": {"layer": MISBOUND["layer"], "stage": "attn_out"}}
        manifest["engine"]["name"] += f", layer {MISBOUND['layer']} o_proj bound from layer {MISBOUND['from']}"
    if mutant in ops.INVARIANCE:
        what, bug = ops.INVARIANCE[mutant]
        manifest["invariance"] = {"name": mutant, "wrong": what, "stands_for": bug, "chunk": ops.CHUNK}
    elif mutant:
        what, where = ops.MUTANTS[mutant]
        manifest["mutant"] = {"name": mutant, "wrong": what, "rule": where, "cause": cause(mutant), "acts_at": acts_at(ref, model_dir, mutant, clean or Model(model_dir, torch.float64))}
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    log(f"{out_dir}: {manifest['engine']['name']} ({dtype_name})"
        + (f", acts at {manifest['mutant']['acts_at']}" if "mutant" in manifest else ""))
    return manifest


def npy(candidate_dir, path, row=None):
    """The candidate's logits as a .npy (all rows, or one: what k3 compare-logits reads besides raw files)."""
    with open(os.path.join(candidate_dir, "manifest.json")) as f:
        a = json.load(f)["arrays"].get("logits")
    if a is None:
        return
    v = np.fromfile(os.path.join(candidate_dir, a["file"]), dtype="<f4").reshape(a["shape"])
    np.save(path, v if row is None else v[row])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("reference", help="the reference dump directory")
    ap.add_argument("--out", required=True)
    ap.add_argument("--mutant", choices=sorted(ops.MUTANTS) + sorted(ops.INVARIANCE),
                    help="a named wrong port (ops.MUTANTS), or an engine that parts from itself (ops.INVARIANCE: the B of a pair "
                         "whose A is the clean candidate, for k3 conform --candidate A --against B)")
    ap.add_argument("--all-mutants", action="store_true", help="DIR/float32 and DIR/<name> for every mutant")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    ap.add_argument("--lossy", choices=sorted(LOSSY), help="a quantised port: the trunk's matrices in this precision")
    a = ap.parse_args()
    torch.set_num_threads(1)
    ref = Reference(a.reference)
    if a.all_mutants:
        write(ref, os.path.join(a.out, a.dtype), a.dtype)
        npy(os.path.join(a.out, a.dtype), os.path.join(a.out, f"logits-{a.dtype}.npy"))
        clean = Model(ref.model_dir(), torch.float64)  # shared: weights read once for every mutant's acts_at
        for name in ops.MUTANTS:
            write(ref, os.path.join(a.out, name), a.dtype, name, clean, greedy_ids=False)
            npy(os.path.join(a.out, name), os.path.join(a.out, f"logits-{name}.npy"), row=len(ref.m["prompt_ids"]) - 1)
        for name in ops.INVARIANCE:  # engines that part from themselves: each against DIR/float32
            write(ref, os.path.join(a.out, name), a.dtype, name, greedy_ids=False)
        for lossy in LOSSY:  # the lossy ladder (every logits array the reference defines: a lossy grade judges both), and an int4 port that is also wrong
            write(ref, os.path.join(a.out, lossy), a.dtype, lossy=lossy)
        write(ref, os.path.join(a.out, "int4-misbound"), a.dtype, greedy_ids=False, lossy="int4", misbound=True)
        write(ref, os.path.join(a.out, "misbound"), a.dtype, greedy_ids=False, misbound=True)
        for name in NOISE:
            noisy(os.path.join(a.out, a.dtype), os.path.join(a.out, name), name)
        npy(os.path.join(a.out, "int4"), os.path.join(a.out, "logits-int4.npy"))
        for name in ONE_FILE:
            for ext in ("safetensors", "npz"):
                candidate_file.from_folder(os.path.join(a.out, name), os.path.join(a.out, f"{name}.{ext}"))
    else:
        write(ref, a.out, a.dtype, a.mutant, lossy=a.lossy)


if __name__ == "__main__":
    main()

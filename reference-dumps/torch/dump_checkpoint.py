#!/usr/bin/python3
"""Reference dump of a Kimi K3 checkpoint in the released layout (format: docs/formats.md §7).

  /usr/bin/python3 reference-dumps/torch/dump_checkpoint.py MODEL_DIR --ids 250,17,... --gen 20 --out DUMP
      [--no-mutants] [--no-drift] [--no-data-hash] [--safety 10] [--experts]
  /usr/bin/python3 reference-dumps/torch/dump_checkpoint.py MODEL_DIR --ids ... --gen G --out DUMP --layers A-B
  /usr/bin/python3 reference-dumps/torch/dump_checkpoint.py MODEL_DIR --ids ... --gen G --out DUMP --resume
  /usr/bin/python3 reference-dumps/torch/dump_checkpoint.py MODEL_DIR --experts-only --out DUMP [--expert-layers 1,5-9]

Runs the float64 reference: greedy decode (incremental), teacher forcing over prompt+generated ids
with every stage recorded, the float32 drift (end to end and per layer from the reference's own
inputs) from which the tolerances are derived, the mutant table, and the self checks
(causality, incremental = full recompute). --experts adds the expert sweep (every routed expert on seeded
probes, stored as sketches: k3ref/experts.py, docs/formats.md §7.10); --experts-only adds or resumes it on an existing dump.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from k3ref import experts as expert_sweep  # noqa: E402
from k3ref import ops  # noqa: E402
from k3ref.metrics import layer_routing_gap, top2_margin  # noqa: E402
from k3ref.model import Config, Model, greedy  # noqa: E402
from k3ref.safetensors_io import header_sha256, read_header, sha256_file  # noqa: E402

FORMAT_VERSION = 1
STAGES = ["partial_in", "attn_in", "attn_norm", "attn_out", "partial_attn", "mlp_in", "mlp_norm", "mlp_out",
          "partial_out"]
F32_FLOOR_ULPS = 4.0  # tolerance floor: 4 float32 ulps of the stage's largest magnitude


def repo_root():
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def rel(path):
    p = os.path.abspath(path)
    root = repo_root()
    return os.path.relpath(p, root) if p.startswith(root + os.sep) else p


def checkpoint_files(model_dir, data_hash=True):
    out = []
    for n in sorted(os.listdir(model_dir)):
        path = os.path.join(model_dir, n)
        if not os.path.isfile(path) or not (n.endswith(".safetensors") or n.endswith(".json")):
            continue
        e = {"name": n, "size": os.path.getsize(path)}
        if not os.path.isabs(rel(path)):
            e["path"] = rel(path)  # repository-relative: ci/check-fixtures verifies it
        if data_hash:
            e["sha256"] = sha256_file(path)
        if n.endswith(".safetensors"):
            _, hb, base = read_header(path)
            e["header_bytes"] = base
            e["header_sha256"] = header_sha256(path)
        out.append(e)
    return out


class Writer:
    def __init__(self, out_dir, clear=True):
        self.dir = out_dir
        os.makedirs(out_dir, exist_ok=True)
        for n in os.listdir(out_dir):
            if (clear and (n.endswith(".bin") or n == "manifest.json")) or n.endswith(".tmp"):
                os.remove(os.path.join(out_dir, n))
        self.arrays = {}

    def put(self, key, t):
        """Writes key.bin (via a temporary file and a rename: a crash never leaves a half-written array)."""
        if t.is_floating_point():
            dt, arr = "F32", t.detach().to(torch.float32).contiguous().numpy().astype("<f4")
        else:
            dt, arr = "I32", t.detach().to(torch.int64).contiguous().numpy().astype("<i4")
        b = arr.tobytes()
        fname = key + ".bin"
        tmp = os.path.join(self.dir, fname + ".tmp")
        with open(tmp, "wb") as f:
            f.write(b)
        os.replace(tmp, os.path.join(self.dir, fname))
        self.arrays[key] = {"file": fname, "dtype": dt, "shape": list(t.shape),
                            "sha256": hashlib.sha256(b).hexdigest()}


class Progress:
    """A one-line progress bar with the measured time per layer and an ETA, on stderr (no dependency)."""

    def __init__(self, what, stream=sys.stderr):
        import time
        self.what, self.stream, self.clock, self.t0, self.times = what, stream, time.monotonic, None, []

    def __call__(self, i, n):
        now = self.clock()
        if self.t0 is None:
            self.t0 = self.start
        self.times.append(now - self.t0)
        self.t0 = now
        per = sum(self.times) / len(self.times)
        done = i + 1
        bar = "#" * (20 * done // n) + "-" * (20 - 20 * done // n)
        eta = per * (n - done)
        self.stream.write(f"\r{self.what} [{bar}] layer {done}/{n}  {per:.1f} s/layer  ETA {int(eta // 60)}m{int(eta % 60):02d}s ")
        if done == n:
            self.stream.write("\n")
        self.stream.flush()

    def begin(self):
        self.start = self.clock()
        self.t0 = None
        self.times = []
        return self


def f32(t):
    return t.to(torch.float32)


def maxdiff(a, b):
    return float((a.to(torch.float64) - b.to(torch.float64)).abs().max()) if a.numel() else 0.0


def tol(drift, ref, sf):
    floor = F32_FLOOR_ULPS * 2.0 ** -24 * float(ref.abs().max()) if ref.numel() else 0.0
    return sf * max(drift, floor)


def mutant_table(L_, lanes, logits, gen_lo, atol_logits):
    """One row per mutant lane: how its logits differ from the reference's, or the tensor it could not bind."""
    rows = []
    amax = float(logits.abs().max())
    ref_arg = logits.argmax(-1)
    for name, (what, where) in ops.MUTANTS.items():
        row = {"name": name, "wrong": what, "rule": where}
        lane = L_[f"mutant.{name}"]
        if "error" in lane:
            row.update(visible_as="bind error", error=lane["error"])
            rows.append(row)
            continue
        lm = lanes.mutants[name].finish(lane)
        d = maxdiff(lm, logits)
        arg = lm.argmax(-1)
        row.update(visible_as="logits", max_abs_dlogit=d, rel_dlogit=d / amax, ratio_to_logit_atol=d / atol_logits,
                   argmax_changed_positions=int((arg != ref_arg).sum()),
                   argmax_changed_generated=int((arg[gen_lo:-1] != ref_arg[gen_lo:-1]).sum()))
        rows.append(row)
    return rows


BUDGET_EPS32, BUDGET_FACTOR = 1.2e-7, 50.0


def budget_rule(cfg, tolerances, logits_absmax):
    """The C engine's per-stage rule (docs/semantics.md §10.7) with the float32 drift measured here, per stage:
    how much of the budget a float32 run of the reference uses, so a gate may tighten the budget."""
    widths = {s: cfg.hidden for s in STAGES}
    widths.update(moe_weight=cfg.topk, moe_choice=cfg.n_experts)
    stages = {}
    for s, width in widths.items():
        rows = [lt["stages"][s] for lt in tolerances["layers"] if s in lt["stages"]]
        if not rows:
            continue
        b = BUDGET_EPS32 * width ** 0.5 * BUDGET_FACTOR
        worst_layer = max(r["drift_layer"] / max(r["ref_absmax"], 1e-300) for r in rows)
        worst_e2e = max(r["drift_e2e"] / max(r["ref_absmax"], 1e-300) for r in rows)
        stages[s] = {"width": width, "budget": b, "fp32_ratio_layer_max": worst_layer,
                     "fp32_ratio_e2e_max": worst_e2e, "fp32_share_of_budget_layer": worst_layer / b,
                     "fp32_share_of_budget_e2e": worst_e2e / b}
    lr = tolerances["logits"]["drift_e2e"] / max(logits_absmax, 1e-300)
    lb = BUDGET_EPS32 * cfg.hidden ** 0.5 * BUDGET_FACTOR  # a logit is the LM head's dot product over E
    return {"rule": ("ratio = max|engine - ref| / max|ref| over a stage's array, pass iff ratio <= budget = "
                     "eps32 * sqrt(width) * factor (width = the compared vector length: hidden for the "
                     "layer stages and for the logits, each an LM-head dot product over hidden); the C engine's conform_all rule. fp32_ratio_* = the "
                     "same ratio for the float32 reference run (per layer alone / end to end), the worst "
                     "layer; a dump may tighten factor down to what these figures allow."),
            "eps32": BUDGET_EPS32, "factor": BUDGET_FACTOR, "stages": stages,
            "logits": {"width": cfg.hidden, "budget": lb, "fp32_ratio_e2e_max": lr, "fp32_share_of_budget_e2e": lr / lb}}


def state_arrays(st):
    """Dump keys of one layer's final state: KDA recurrent + conv histories, or the MLA cache."""
    if "S" in st:
        return {"kda_state": st["S"], "q_conv_state": st["q_conv"], "k_conv_state": st["k_conv"],
                "v_conv_state": st["v_conv"]}
    return {"mla_kv": st["kv"], "mla_rope": st["rope"]}


class DumpError(Exception):
    """A request the dump cannot honour (a range that does not continue the carry, a carry of other settings)."""


RESUME_DIR = "resume"  # inside the dump directory while the dump is unfinished; removed with the manifest's write
CARRY_FORMAT, CARRY_VERSION = "k3ref-carry", 1


def parse_layers(text):
    """'A-B' or 'A' -> (A, B), inclusive."""
    try:
        lo, _, hi = text.partition("-")
        a, b = int(lo), int(hi) if hi else int(lo)
    except ValueError:
        raise DumpError(f"--layers takes A-B (inclusive, 0-based), got '{text}'") from None
    if a < 0 or b < a:
        raise DumpError(f"--layers {text}: need 0 <= A <= B")
    return a, b


def save_atomic(obj, path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    torch.save(obj, tmp)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


class Lanes:
    """Every whole-model computation of a dump, advanced layer by layer together: each layer's weights are read
    once, and after any layer the lanes (partial sums + AttnRes snapshots, float64 or float32) are the whole
    state of the computation. A lane is {"h", "snaps", "T"}, or {"error"} for a mutant that cannot bind."""

    def __init__(self, m64, m32, mutant_models):
        self.m64, self.m32, self.mutants = m64, m32, mutant_models

    def model(self, name):
        if name == "f32":
            return self.m32
        if name.startswith("mutant."):
            return self.mutants[name[len("mutant."):]]
        return self.m64

    def begin(self, name, ids):
        try:
            return self.model(name).begin(ids)
        except KeyError as e:
            if not name.startswith("mutant."):
                raise
            return {"error": str(e).strip("'\"")}

    def advance(self, name, lane, i, record=None):
        if "error" in lane:
            return None
        try:
            return self.model(name).advance(i, lane, None, record)
        except KeyError as e:
            if not name.startswith("mutant."):
                raise
            lane.clear()
            lane["error"] = str(e).strip("'\"")
            return None

    def release(self, i):
        for m in [self.m64, self.m32, *self.mutants.values()]:
            if m is not None:
                m.release(i)


def make_dump(model_dir, prompt, n_gen, out_dir, *, mutants=True, drift=True, data_hash=True, sf=10.0,
              e8m0_255="zero", cache_weights=True, states=True, recompute_check=True, causality_check=True,
              layers=None, resume=False, log=print):
    """Writes the dump, or the layers (A, B) of it (``layers``) continuing the carry in out_dir/resume.

    Every whole-model computation (teacher forcing, the causality prefix, the full-recompute greedy check, the
    float32 end-to-end run, the mutants) is a lane advanced one layer at a time; after each layer its arrays
    are written and then the carry (the lanes, float64/float32 exactly, via torch.save), atomically. A dump
    made in ranges or resumed after a crash therefore runs the same ops on the same inputs as one run, and
    its files are the same bytes. Returns the manifest once the last layer is done, else None.
    """
    cfg = Config.load(os.path.join(model_dir, "config.json"))
    L = cfg.n_layers
    settings = {"checkpoint": os.path.abspath(model_dir), "prompt": list(prompt), "gen": n_gen, "mutants": mutants,
                "drift": drift, "data_hash": data_hash, "safety": sf, "e8m0_255": e8m0_255, "states": states,
                "stream": not cache_weights, "recompute_check": recompute_check,
                "causality_check": causality_check, "torch_threads": torch.get_num_threads()}
    carry_path = os.path.join(out_dir, RESUME_DIR, "carry.pt")
    a, b = layers if layers is not None else (0, L - 1)
    if b >= L:
        raise DumpError(f"--layers {a}-{b}: the model has layers 0-{L - 1}")
    fresh = not resume and a == 0
    if not fresh:
        if not os.path.isfile(carry_path):
            raise DumpError(f"{out_dir} holds no unfinished dump ({RESUME_DIR}/carry.pt is missing): start at layer 0"
                            + (" (--resume continues a run that was cut short)" if resume else ""))
        carry = torch.load(carry_path)
        if carry.get("format") != CARRY_FORMAT or carry.get("version") != CARRY_VERSION:
            raise DumpError(f"{carry_path} is not a {CARRY_FORMAT} v{CARRY_VERSION} file")
        diff = sorted(k for k in set(settings) | set(carry["settings"]) if settings.get(k) != carry["settings"].get(k))
        if diff:
            raise DumpError(f"{carry_path} was made with other settings ({', '.join(diff)}: "
                            + "; ".join(f"{k} {carry['settings'].get(k)!r} there, {settings.get(k)!r} here" for k in diff)
                            + "); give the same flags (and --threads) as the run that made it")
        nxt = carry["next_layer"]
        if resume:
            if layers is not None and a > nxt:
                raise DumpError(f"--resume --layers {a}-{b}: the carry ends before layer {nxt}")
            a = nxt
            b = b if layers is not None else L - 1
        elif a != nxt:
            raise DumpError(f"--layers {a}-{b}: the carry in {out_dir} continues at layer {nxt}"
                            + (" (every layer is done: --resume writes the manifest)" if nxt == L else
                               f"; run --layers {nxt}-{b} or --resume"))
        w = Writer(out_dir, clear=False)
    else:
        w = Writer(out_dir, clear=True)
        shutil.rmtree(os.path.join(out_dir, RESUME_DIR), ignore_errors=True)
        carry = None

    m64 = Model(model_dir, torch.float64, e8m0_255=e8m0_255, cache_weights=cache_weights)
    m32 = Model(model_dir, torch.float32, e8m0_255=e8m0_255, cache_weights=cache_weights) if drift else None
    mut_models = {name: Model(model_dir, torch.float64, mut={name}, e8m0_255=e8m0_255, cache_weights=cache_weights)
                  for name in ops.MUTANTS} if mutants and drift else {}
    lanes = Lanes(m64, m32, mut_models)
    if carry is None:
        log(f"layer map {cfg.layer_map()}; greedy {n_gen} from {len(prompt)} prompt ids (float64, incremental)")
        gen, step_rows = greedy(m64, prompt, n_gen, incremental=True) if n_gen > 0 else ([], [])
        ids = list(prompt) + gen
        w.put("ids", torch.tensor(ids))
        w.put("greedy_ids", torch.tensor(gen, dtype=torch.long))  # I32 even when empty (--gen 0)
        names = ["main"] + (["prefix"] if causality_check else []) + \
            ([f"recompute.{s}" for s in range(n_gen)] if recompute_check else []) + (["f32"] if drift else []) + \
            [f"mutant.{n}" for n in mut_models]
        span = {"main": len(ids), "prefix": len(prompt), **{f"recompute.{s}": len(prompt) + s for s in range(n_gen)},
                "f32": len(ids), **{f"mutant.{n}": len(ids) for n in mut_models}}
        carry = {"format": CARRY_FORMAT, "version": CARRY_VERSION, "settings": settings, "next_layer": 0,
                 "ids": ids, "gen": gen, "step_rows": step_rows,
                 "lanes": {n: lanes.begin(n, ids[:span[n]]) for n in names},
                 "head_arrays": dict(w.arrays), "layer_arrays": [], "layers": [], "tolerance_rows": [],
                 "routing_gaps": [], "routing_order_gaps": [], "routing_flips_e2e": 0, "seconds": []}
    ids, gen, L_ = carry["ids"], carry["gen"], carry["lanes"]
    np_ = len(prompt)
    if a <= b and a < L:
        bar = Progress(f"float64 reference, layers {a}-{b}").begin()
        for i in range(a, b + 1):
            before = len(w.arrays)
            _one_layer(i, cfg, lanes, L_, carry, w, drift=drift, states=states, sf=sf)
            carry["layer_arrays"] += list(w.arrays.items())[before:]
            lanes.release(i)
            bar(i - a, b - a + 1)
            carry["seconds"].append(bar.times[-1])
            carry["next_layer"] = i + 1
            save_atomic(carry, carry_path)
        log(f"float64 seconds per layer (wall), layers {a}-{b}: {', '.join(f'{x:.2f}' for x in bar.times)}")
    if carry["next_layer"] < L:
        log(f"layers 0-{carry['next_layer'] - 1} of {L} done; continue with --layers {carry['next_layer']}-{L - 1} "
            f"(or --resume)")
        return None
    manifest = _finish(model_dir, cfg, prompt, carry, lanes, w, drift=drift, mutants=mutants, data_hash=data_hash,
                       sf=sf, e8m0_255=e8m0_255, states=states, recompute_check=recompute_check,
                       causality_check=causality_check, log=log)
    shutil.rmtree(os.path.join(out_dir, RESUME_DIR))
    return manifest


def _one_layer(i, cfg, lanes, L_, carry, w, *, drift, states, sf):
    """Layer i of every lane; its arrays written, its manifest rows appended to the carry."""
    rec = {}
    seen = list(L_["main"]["snaps"])
    st = lanes.advance("main", L_["main"], i, rec)
    for s in STAGES:
        w.put(f"layers.{i}.{s}", rec[f"layers.{i}.{s}"])
    carry["layers"].append({"index": i, "mixer": "mla" if cfg.is_mla(i) else "kda",
                            "mlp": "moe" if cfg.is_moe(i) else "dense", "boundary": i % cfg.attn_res_block == 0,
                            "snapshots_attn": rec[f"layers.{i}.n_snapshots_attn"],
                            "snapshots_mlp": rec[f"layers.{i}.n_snapshots_mlp"]})
    if cfg.is_moe(i):
        for s in ("moe_idx", "moe_weight", "moe_choice"):
            w.put(f"layers.{i}.{s}", rec[f"layers.{i}.{s}"])
        carry["routing_gaps"].append(layer_routing_gap(rec[f"layers.{i}.moe_choice"], cfg.topk))
        carry["routing_order_gaps"].append(layer_routing_gap(rec[f"layers.{i}.moe_choice"], cfg.topk, order=True))
    if states:
        for k, v in state_arrays(st).items():
            w.put(f"layers.{i}.{k}", v)
    for name, lane in L_.items():
        if name.startswith("prefix") or name.startswith("recompute."):
            lanes.advance(name, lane, i)
    if drift:
        rec32 = {}
        st32e = lanes.advance("f32", L_["f32"], i, rec32)
        lt = {"index": i, "stages": {}}
        r32 = {}
        _, _, st32 = lanes.m32.run_layer(i, f32(rec[f"layers.{i}.partial_in"]), [f32(s) for s in seen], None, r32)
        keys = STAGES + (["moe_weight", "moe_choice"] if cfg.is_moe(i) else [])
        if states:
            for k, v in state_arrays(st32).items():
                r32[f"layers.{i}.{k}"] = v
            for k, v in state_arrays(st32e).items():
                rec32[f"layers.{i}.{k}"] = v
            for k, v in state_arrays(st).items():
                rec[f"layers.{i}.{k}"] = v
            keys = keys + list(state_arrays(st))
        for s in keys:
            ref = rec[f"layers.{i}.{s}"]
            d_e2e = maxdiff(rec32[f"layers.{i}.{s}"], ref)
            d_layer = maxdiff(r32[f"layers.{i}.{s}"], ref)
            lt["stages"][s] = {"drift_layer": d_layer, "drift_e2e": d_e2e, "atol_layer": tol(d_layer, ref, sf),
                               "atol_e2e": tol(d_e2e, ref, sf), "ref_absmax": float(ref.abs().max())}
        if cfg.is_moe(i):
            lt["routing_equal_layer"] = bool((r32[f"layers.{i}.moe_idx"] == rec[f"layers.{i}.moe_idx"]).all())
            eq = bool((rec32[f"layers.{i}.moe_idx"] == rec[f"layers.{i}.moe_idx"]).all())
            lt["routing_equal_e2e"] = eq
            carry["routing_flips_e2e"] += 0 if eq else 1
        carry["tolerance_rows"].append(lt)
    for name, lane in L_.items():
        if name.startswith("mutant."):
            lanes.advance(name, lane, i)


def _finish(model_dir, cfg, prompt, carry, lanes, w, *, drift, mutants, data_hash, sf, e8m0_255, states,
            recompute_check, causality_check, log):
    """After the last layer: the model-level arrays, self checks, tolerances, mutant table and the manifest."""
    ids, gen, L_, m64 = carry["ids"], carry["gen"], carry["lanes"], lanes.m64
    T, np_, n_gen = len(ids), len(prompt), len(gen)
    rec = {}
    logits = m64.finish(L_["main"], rec)
    w.arrays = dict(carry["head_arrays"])
    w.put("logits", logits)
    w.put("snapshots", rec["snapshots"])
    w.put("final_mix", rec["final_mix"])
    w.put("final_norm", rec["final_norm"])
    w.arrays.update(carry["layer_arrays"])
    layers = carry["layers"]

    # ---- self checks ----
    checks = {}
    if carry["step_rows"]:
        checks["incremental_vs_teacher_forcing_max_abs"] = maxdiff(torch.stack(carry["step_rows"], 0),
                                                                   logits[np_ - 1:T - 1])
    if causality_check:
        checks["prefix_causality_max_abs"] = maxdiff(m64.finish(L_["prefix"]), logits[:np_])
    if recompute_check:
        full_gen = [int(torch.argmax(m64.finish(L_[f"recompute.{s}"])[-1])) for s in range(n_gen)]
        checks["full_recompute_greedy_equal"] = full_gen == gen
    margins = [top2_margin(logits[np_ - 1 + s]) for s in range(n_gen)]
    moe = cfg.n_layers > cfg.first_dense
    robust = {"greedy_top2_margins": margins, "min_greedy_margin": min(margins) if margins else None,
              "min_routing_gap": min(carry["routing_gaps"]) if moe else None,
              "min_routing_order_gap": min(carry["routing_order_gaps"]) if moe else None}

    # ---- drift and tolerances ----
    tolerances = {"safety_factor": sf, "floor_f32_ulps": F32_FLOOR_ULPS}
    if drift:
        rec32 = {}
        logits32 = lanes.m32.finish(L_["f32"], rec32)
        e2e = {"logits": maxdiff(logits32, logits), "final_mix": maxdiff(rec32["final_mix"], rec["final_mix"]),
               "final_norm": maxdiff(rec32["final_norm"], rec["final_norm"])}
        per_layer = carry["tolerance_rows"]
        tolerances.update({
            "rule": ("atol = safety_factor * max(drift, floor); drift = max |float32 run - float64 run| over the "
                     "array (the same torch code, all weights and activations float32); floor = "
                     "floor_f32_ulps * 2^-24 * max|reference|; rtol = 0. 'layer' = the layer run alone in "
                     "float32 from this dump's own inputs (partial_in + the snapshots it sees, as stored); "
                     "'e2e' = the whole model run in float32 from the ids. Compare max |got - want| <= atol. "
                     "moe_idx is compared exactly (selection order). Greedy/teacher-forced argmax: exact."),
            "logits": {"drift_e2e": e2e["logits"], "atol": tol(e2e["logits"], logits, sf)},
            "final_mix": {"drift_e2e": e2e["final_mix"], "atol": tol(e2e["final_mix"], rec["final_mix"], sf)},
            "final_norm": {"drift_e2e": e2e["final_norm"], "atol": tol(e2e["final_norm"], rec["final_norm"], sf)},
            "layers": per_layer,
            "routing_flips_e2e_layers": carry["routing_flips_e2e"],
            "choice_drift_e2e_max": max((lt["stages"]["moe_choice"]["drift_e2e"] for lt in per_layer
                                         if "moe_choice" in lt["stages"]), default=0.0),
        })
        robust["margin_over_logit_drift"] = robust["min_greedy_margin"] / max(e2e["logits"], 1e-300)
        if robust["min_routing_gap"] is not None:
            robust["routing_gap_over_choice_drift"] = robust["min_routing_gap"] / max(
                tolerances["choice_drift_e2e_max"], 1e-300)
            robust["routing_order_gap_over_choice_drift"] = robust["min_routing_order_gap"] / max(
                tolerances["choice_drift_e2e_max"], 1e-300)
    budget = budget_rule(cfg, tolerances, float(logits.abs().max())) if drift else None
    mut_rows = []
    if mutants and drift:
        log("mutant table")
        mut_rows = mutant_table(L_, lanes, logits, np_ - 1, tolerances["logits"]["atol"])

    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    manifest = {
        "format": "k3ref-dump",
        "format_version": FORMAT_VERSION,
        "generator": {"script": "reference-dumps/torch/dump_checkpoint.py", "torch": torch.__version__,
                      "numpy": np.__version__, "python": platform.python_version()},
        "checkpoint": {"dir": rel(model_dir), "files": checkpoint_files(model_dir, data_hash)},
        "config": config,
        "layer_map": cfg.layer_map(),
        "boundaries": [i for i in range(cfg.n_layers) if i % cfg.attn_res_block == 0],
        "prompt_ids": list(prompt),
        "generated_ids": gen,
        "ids": ids,
        "precision": {"reference": "float64", "stored_floats": "F32 (the float64 result rounded to nearest)",
                      "e8m0_255": e8m0_255, "lora_norm_eps": 1e-6, "l2norm_eps": 1e-6},
        "layers": layers,
        "self_checks": checks,
        "robustness": robust,
        "tolerances": tolerances,
        "budget": budget,
        "mutants": mut_rows,
        "arrays": w.arrays,
    }
    tmp = os.path.join(w.dir, "manifest.json.tmp")
    with open(tmp, "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    os.replace(tmp, os.path.join(w.dir, "manifest.json"))
    log(f"float64 seconds per layer (wall, every lane), all runs: {', '.join(f'{x:.2f}' for x in carry['seconds'])}")
    return manifest


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir")
    ap.add_argument("--ids", help="comma-separated prompt ids (required unless --experts-only)")
    ap.add_argument("--gen", type=int)
    ap.add_argument("--out", required=True)
    ap.add_argument("--no-mutants", action="store_true")
    ap.add_argument("--no-drift", action="store_true")
    ap.add_argument("--no-data-hash", action="store_true", help="hash shard headers only (huge checkpoints)")
    ap.add_argument("--stream", action="store_true", help="do not keep layer/expert weights between uses")
    ap.add_argument("--no-states", action="store_true", help="skip the KDA state / MLA cache arrays (huge models)")
    ap.add_argument("--no-recompute-check", action="store_true",
                    help="skip the greedy-by-full-recompute cross-check (G extra full forwards)")
    ap.add_argument("--no-causality-check", action="store_true",
                    help="skip the prompt-alone causality cross-check (one extra full forward)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    ap.add_argument("--safety", type=float, default=10.0)
    ap.add_argument("--experts", action="store_true", help="then sweep every routed expert (docs/formats.md §7.10)")
    ap.add_argument("--experts-only", action="store_true",
                    help="add (or resume) the expert sweep on the existing dump in --out; nothing else is rewritten")
    ap.add_argument("--expert-layers", help="with --experts-only: sweep only these MoE layers (e.g. 1,5-9)")
    ap.add_argument("--layers", metavar="A-B",
                    help="dump only layers A..B (inclusive); A > 0 continues the carry an earlier range left in "
                         "OUT/resume; the run that reaches the last layer writes the manifest (docs/formats.md §7.11). "
                         "With --experts-only: the same as --expert-layers")
    ap.add_argument("--resume", action="store_true",
                    help="continue an unfinished dump in --out from its last completed layer (to the last layer, "
                         "or to B of --layers); with every layer done, write the manifest")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.experts_only:
        if a.resume:
            ap.error("--resume continues a layer dump; --experts-only resumes its sweep by itself")
        sel = None
        spec = a.expert_layers or a.layers
        if spec:
            sel = [j for part in spec.split(",") for j in
                   (range(int(part.split("-")[0]), int(part.split("-")[1]) + 1) if "-" in part else [int(part)])]
        section = expert_sweep.sweep(a.model_dir, a.out, layers=sel, drift=not a.no_drift, cache_weights=not a.stream)
        print(json.dumps({k: section[k] for k in ("complete", "seconds", "detection")}, indent=1))
        return
    if a.ids is None or a.gen is None:
        ap.error("--ids and --gen are required (unless --experts-only)")
    prompt = [int(v) for v in a.ids.split(",") if v.strip()]
    try:
        m = make_dump(a.model_dir, prompt, a.gen, a.out, mutants=not a.no_mutants, drift=not a.no_drift,
                      data_hash=not a.no_data_hash, sf=a.safety, cache_weights=not a.stream,
                      states=not a.no_states, recompute_check=not a.no_recompute_check,
                      causality_check=not a.no_causality_check,
                      layers=parse_layers(a.layers) if a.layers else None, resume=a.resume)
    except DumpError as e:
        print(f"dump_checkpoint.py: {e}", file=sys.stderr)
        sys.exit(1)
    if m is None:
        return
    print(json.dumps({"generated_ids": m["generated_ids"], "robustness": m["robustness"],
                      "self_checks": m["self_checks"]}, indent=1))
    if a.experts:
        expert_sweep.sweep(a.model_dir, a.out, drift=not a.no_drift, cache_weights=not a.stream)


if __name__ == "__main__":
    main()

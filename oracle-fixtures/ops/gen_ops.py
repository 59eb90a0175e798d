#!/usr/bin/python3
"""Kernel fixtures for the Java kernel gate (format: oracle-fixtures/ops/README.md, "k3j-ops/1").

    /usr/bin/python3 oracle-fixtures/ops/gen_ops.py            regenerate oracle-fixtures/ops/ in place
    /usr/bin/python3 oracle-fixtures/ops/gen_ops.py --check    regenerate into a temp dir and compare with the
                                                               committed files (inputs byte for byte, float
                                                               outputs within 1e-12 relative); exit 1 on any difference

Each fixture is ADVERSARIAL: inputs are chosen so that named plausible wrong implementations (mutants) fail.
For every fixture the generator
  1. builds the inputs deterministically (numpy PCG64 seeded by SEED and the fixture name),
  2. takes the expected outputs from the float64 torch reference (reference-dumps/torch/k3ref/ops.py),
  3. cross-checks them against its own float64 model (engine_model.py) -- two independent implementations,
  4. runs the fp32 engine model (float activations, double accumulators where docs/fp-contract.md says so) and sets the
     tolerance to the smallest ladder value c (atol = c*rms(want), rtol = c, c >= 1e-6) that the fp32 model
     passes with a safety factor >= 10,
  5. measures each mutant's worst ratio under that tolerance and REFUSES to write the fixture if a mutant
     listed as defeated fails by less than 10x.
"""
import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import engine_model as em  # noqa: E402
from kit import HERE, F32, F64, FORMAT, LADDER, MIN_DEFEAT, REGISTRY, SAFETY, SEED, worst_ratio  # noqa: E402

# the fixture families, imported in generation order (the manifest keeps this order)
import fx_norms  # noqa: E402,F401
import fx_activations  # noqa: E402,F401
import fx_kda  # noqa: E402,F401
import fx_products  # noqa: E402,F401
import fx_router  # noqa: E402,F401
import fx_attn_res  # noqa: E402,F401
import fx_layers  # noqa: E402,F401
import fx_decoder  # noqa: E402,F401
from fx_layers import KDA_STATES, kda_layer_prev_state  # noqa: E402


# ----------------------------------------------------------------------------------------------- reference

def reference_outputs(fx):
    """Expected outputs: the float64 torch reference (k3ref.ops) via adapters; falls back to the local float64
    model only when K3J_OPS_LOCAL_REF=1 (development before the reference landed; recorded in the manifest)."""
    if os.environ.get("K3J_OPS_LOCAL_REF") == "1":
        return fx.run(F64), "local float64 model (engine_model.py), k3ref.ops not yet available"
    import ref_adapter
    return ref_adapter.expected(fx), "reference-dumps/torch/k3ref/ops.py (float64)"


# ----------------------------------------------------------------------------------------------- tolerances

def choose_tolerance(want, got32):
    want = np.asarray(want, F64)
    scale = float(np.sqrt(np.mean(want ** 2))) if want.size else 1.0
    if scale == 0.0:
        scale = 1.0
    for c in LADDER:
        atol, rtol = c * scale, c
        if worst_ratio(got32, want, atol, rtol) * SAFETY <= 1.0:
            return {"atol": float("%.3g" % atol), "rtol": rtol}
    raise SystemExit("no tolerance on the ladder covers the fp32 engine model")


def fmt(x):
    return float("%.3g" % x) if np.isfinite(x) else "inf"


def build(fx, outdir):
    want, ref_src = reference_outputs(fx)
    local = fx.run(F64)
    for k in want:
        a, b = np.asarray(want[k], F64), np.asarray(local[k], F64)
        if a.shape != b.shape:
            raise SystemExit("%s: reference and local model shapes differ on %s" % (fx.name, k))
        if k in fx.exact:
            agree = np.array_equal(a, b)
        else:
            agree = not a.size or float(np.max(np.abs(a - b) / (1e-9 * (np.sqrt(np.mean(a ** 2)) + np.abs(a))))) <= 1.0
        if not agree:
            raise SystemExit("%s: reference and the local model disagree on %s (max |d| %.3g)"
                             % (fx.name, k, float(np.max(np.abs(a - b)))))
    got32 = fx.run(F32)
    tol, fp32_ratio = {}, {}
    for k in want:
        if k in fx.exact:
            if not np.array_equal(np.asarray(got32[k], F64), np.asarray(want[k], F64)):
                raise SystemExit("%s: fp32 engine model is not exact on %s" % (fx.name, k))
            tol[k] = {"exact": True}
            fp32_ratio[k] = 0.0
        else:
            tol[k] = choose_tolerance(want[k], got32[k])
            fp32_ratio[k] = fmt(worst_ratio(got32[k], want[k], tol[k]["atol"], tol[k]["rtol"]))
    mutants = {}
    text = []
    for mname, mut, A, what in fx.mutants:
        got = fx.run(A, mut)
        worst, exact_diff = 0.0, []
        for k in want:
            if k in fx.exact:
                nd = int(np.sum(np.asarray(got[k], F64) != np.asarray(want[k], F64)))
                if nd:
                    exact_diff.append("%s differ in %d of %d" % (k, nd, np.asarray(want[k]).size))
                    worst = float("inf")
            else:
                worst = max(worst, worst_ratio(got[k], want[k], tol[k]["atol"], tol[k]["rtol"]))
        if worst < MIN_DEFEAT:
            raise SystemExit("%s: mutant %s fails by only %.3g x (< %g): make the input more adversarial"
                             % (fx.name, mname, worst, MIN_DEFEAT))
        if exact_diff:
            desc = "; ".join(exact_diff)
            float_w = max([worst_ratio(got[k], want[k], tol[k]["atol"], tol[k]["rtol"]) for k in want if k not in fx.exact] or [0])
            if float_w:
                desc += "; float outputs %sx" % fmt(float_w)
            mutants[mname] = {"what": what, "worst_ratio": "inf", "detail": desc}
            text.append("%s (%s): %s" % (mname, what, desc))
        else:
            nan = not all(np.all(np.isfinite(np.asarray(got[k], F64))) for k in want)
            mutants[mname] = {"what": what, "worst_ratio": "inf" if nan else fmt(worst)}
            text.append("%s (%s): fails by %s" % (mname, what, "NaN/Inf" if nan else "%.3gx" % worst))
    ref_mut = {}
    if ref_src.startswith("reference-dumps"):
        import ref_adapter
        for mname, what in ref_adapter.ref_mutants(fx):
            got = ref_adapter.expected(fx, frozenset([mname]))
            worst, detail = 0.0, []
            for k in want:
                if k in fx.exact:
                    nd = int(np.sum(np.asarray(got[k], F64) != np.asarray(want[k], F64)))
                    if nd:
                        detail.append("%s differ in %d of %d" % (k, nd, np.asarray(want[k]).size))
                        worst = float("inf")
                else:
                    worst = max(worst, worst_ratio(got[k], want[k], tol[k]["atol"], tol[k]["rtol"]))
            if worst < MIN_DEFEAT:
                raise SystemExit("%s: reference mutant %s fails by only %.3g x (< %g)" % (fx.name, mname, worst, MIN_DEFEAT))
            ref_mut[mname] = {"what": what, "worst_ratio": fmt(worst) if not detail else "inf"}
            if detail:
                ref_mut[mname]["detail"] = "; ".join(detail)
            text.append("k3ref mutant %s: %s" % (mname, "; ".join(detail) if detail else "fails by %.3gx" % worst))
    torch32 = {}
    if ref_src.startswith("reference-dumps"):
        import torch
        import ref_adapter
        got = ref_adapter.expected(fx, frozenset(), torch.float32)
        for k in want:
            if k in fx.exact:
                torch32[k] = 0.0 if np.array_equal(np.asarray(got[k], F64), np.asarray(want[k], F64)) else "inf"
            else:
                torch32[k] = fmt(worst_ratio(got[k], want[k], tol[k]["atol"], tol[k]["rtol"]))
    os.makedirs(os.path.join(outdir, fx.name), exist_ok=True)

    def write(arrname, dtype, arr):
        rel = "%s/%s.bin" % (fx.name, arrname)
        enc = {"f32": "<f4", "f64": "<f8", "bf16": "<u2", "u8": "u1", "i32": "<i4"}[dtype]
        data = np.ascontiguousarray(np.asarray(arr).astype(enc)).tobytes()
        with open(os.path.join(outdir, rel), "wb") as f:
            f.write(data)
        return {"file": rel, "dtype": dtype, "shape": list(np.asarray(arr).shape),
                "sha256": hashlib.sha256(data).hexdigest()}
    inputs = {n: write(n, dt, raw) for n, (dt, raw) in fx.inputs.items()}
    outputs = {}
    for k, v in want.items():
        dt = "i32" if np.asarray(v).dtype.kind in "iu" else "f64"
        outputs[k] = write(k, dt, v)
    entry = {"name": fx.name, "kernel": fx.kernel, "level": fx.level, "params": fx.params,
             "inputs": inputs, "outputs": outputs, "tolerance": tol,
             "adversarial": "; ".join(text) + ("" if not fx.notes else ". " + ". ".join(fx.notes)),
             "fp32_worst_ratio": fp32_ratio, "torch_fp32_worst_ratio": torch32, "mutants": mutants, "reference_mutants": ref_mut,
             "expected_from": ref_src}
    if fx.pitfall:
        entry["pitfall"] = fx.pitfall
    entry.update(fx.extra)
    return entry, want


def router_margin(fx, want):
    """Smallest gap between adjacent biased choices among the top-(k+1), in float64: an index output is exact, so
    the fixture must not sit on a near-tie that fp32 rounding could flip (ties on purpose are exact ties)."""
    pre = "block_sparse_moe."
    v, p = fx.values, fx.params
    if fx.kernel == "router":
        x, gw, b, k = v["x"], v["gate_w"], v["bias"], p["top_k"]
    elif fx.kernel == "latent_moe":
        x, gw, b, k = v["x"], v[pre + "gate.weight"], v[pre + "gate.e_score_correction_bias"], p["top_k"]
    elif fx.kernel == "decoder_layer":
        x = em.rmsnorm(want["mlp_in"], v["post_attention_layernorm.weight"], p["rms_eps"], F64)
        gw, b, k = v[pre + "gate.weight"], v[pre + "gate.e_score_correction_bias"], p["moe.top_k"]
    else:
        return None
    s = 1.0 / (1.0 + np.exp(-(np.asarray(x, F64) @ np.asarray(gw, F64).T)))
    c = -np.sort(-(s + np.asarray(b, F64)), axis=1)[:, :k + 1]
    gaps = (c[:, :-1] - c[:, 1:]).ravel()
    gaps = gaps[gaps > 0] if fx.name.startswith("router_ties") else gaps
    return float(np.min(gaps))


def generate(outdir, only=None):
    import torch
    entries = []
    for fn in REGISTRY:
        if only and fn.__name__ not in only:
            continue
        fx = fn()
        entry, want = build(fx, outdir)
        margin = router_margin(fx, want)
        if margin is not None:
            if margin < 1e-4:
                raise SystemExit("%s: router choices have a near-tie (%.3g < 1e-4): indices would be fragile" % (fx.name, margin))
            entry["router_min_margin"] = fmt(margin)
        if fx.kernel == "kda_layer":
            kda_layer_prev_state[fx.name] = {s: np.asarray(want[s + "_out"], F64) for s in KDA_STATES}
        entries.append(entry)
        print("%-34s %-15s tol %s  fp32 %s" % (fx.name, fx.kernel, json.dumps(entry["tolerance"]),
                                                json.dumps(entry["fp32_worst_ratio"])), flush=True)
        print("    mutants: " + ", ".join("%s %s" % (m, d.get("detail", d["worst_ratio"]))
                                          for m, d in entry["mutants"].items()), flush=True)
        print("    torch fp32 (float-accumulating matmuls, informational): " + json.dumps(entry["torch_fp32_worst_ratio"]))
        print("    k3ref mutants: " + ", ".join("%s %s" % (m, d.get("detail", d["worst_ratio"]))
                                                for m, d in entry["reference_mutants"].items()), flush=True)
    manifest = {"format": FORMAT, "generator": "oracle-fixtures/ops/gen_ops.py", "torch": torch.__version__,
                "numpy": np.__version__, "seed": SEED, "safety_factor": SAFETY, "min_defeat_factor": MIN_DEFEAT,
                "fixtures": entries}
    with open(os.path.join(outdir, "MANIFEST.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    return manifest


# ----------------------------------------------------------------------------------------------- check

def check():
    committed = HERE
    with open(os.path.join(committed, "MANIFEST.json")) as f:
        old = json.load(f)
    tmp = tempfile.mkdtemp(prefix="k3j-ops-check-")
    bad = []
    try:
        new = generate(tmp)
        on = {e["name"]: e for e in old["fixtures"]}
        nn = {e["name"]: e for e in new["fixtures"]}
        if list(on) != list(nn):
            bad.append("fixture lists differ: %s vs %s" % (list(on), list(nn)))
        for name in nn:
            if name not in on:
                continue
            a, b = on[name], nn[name]
            for key in ("kernel", "level", "params", "tolerance", "pitfall"):
                if a.get(key) != b.get(key):
                    bad.append("%s: %s differs: %s vs %s" % (name, key, a.get(key), b.get(key)))
            for sect in ("inputs", "outputs"):
                if set(a[sect]) != set(b[sect]):
                    bad.append("%s: %s names differ" % (name, sect))
                    continue
                for arr, da in a[sect].items():
                    db = b[sect][arr]
                    pa, pb = os.path.join(committed, da["file"]), os.path.join(tmp, db["file"])
                    ba = open(pa, "rb").read()
                    bb = open(pb, "rb").read()
                    if hashlib.sha256(ba).hexdigest() != da["sha256"]:
                        bad.append("%s: committed file does not match its sha256" % da["file"])
                    if da["dtype"] != db["dtype"] or da["shape"] != db["shape"]:
                        bad.append("%s: dtype/shape differ" % da["file"])
                    elif da["dtype"] == "f64":
                        x, y = np.frombuffer(ba, "<f8"), np.frombuffer(bb, "<f8")
                        rel = np.max(np.abs(x - y) / np.maximum(np.abs(x), 1e-300)) if x.size else 0.0
                        if x.shape != y.shape or rel > 1e-12:
                            bad.append("%s: float64 output differs (max rel %.3g)" % (da["file"], rel))
                    elif ba != bb:
                        bad.append("%s: bytes differ" % da["file"])
        listed = {"MANIFEST.json"} | {d["file"] for e in old["fixtures"] for s in ("inputs", "outputs")
                                      for d in e[s].values()}
        for dirpath, dirs, files in os.walk(committed):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for fn in files:
                rel = os.path.relpath(os.path.join(dirpath, fn), committed)
                if rel.endswith(".bin") and rel not in listed:
                    bad.append("%s: a .bin file the manifest does not list" % rel)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if bad:
        print("CHECK FAILED:\n  " + "\n  ".join(bad))
        return 1
    print("CHECK OK: %d fixtures regenerate identically (inputs byte for byte, f64 outputs within 1e-12 rel)"
          % len(old["fixtures"]))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="regenerate into a temp dir and compare with the committed files")
    ap.add_argument("--only", nargs="*", help="generate only these fixtures into a temp dir (development)")
    a = ap.parse_args()
    if a.check:
        sys.exit(check())
    if a.only:
        tmp = tempfile.mkdtemp(prefix="k3j-ops-only-")
        generate(tmp, set(a.only))
        print("written to", tmp)
        return
    for entry in os.listdir(HERE):
        full = os.path.join(HERE, entry)
        if os.path.isdir(full) and entry != "__pycache__":
            shutil.rmtree(full)
    generate(HERE)


if __name__ == "__main__":
    main()

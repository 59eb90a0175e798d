"""ci/bench's one table: every speed target, before (the figures the work started from), after (this run), C (the
same-run C peer for kernels; the C engine's figures from this machine class for the whole job, a reference point),
ratio, target, met or not, and the measured facts that bound it.

usage: bench-table.py OUT_DIR REPO_ROOT
"""
import glob, json, os, re, statistics, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_kernels  # noqa: E402

out, root = sys.argv[1], sys.argv[2]

# ---------------------------------------------------------------- inputs

def kernels():
    """(side, kernel, threads) -> min ms over the rounds; stream GB/s per thread count; check lines; problems."""
    k = peer_kernels.Kernels(f"{out}/kernels.txt")
    return k.best, k.stream, {n: 10**9 if v is None else v for n, v in k.checks.items()}, k.failures


def load(path):
    try:
        return json.load(open(path))
    except (OSError, ValueError):
        return None


K, BW, CHECKS, KNOTES = kernels()
MOE = {}
for r in load(f"{out}/moe.json") or []:
    MOE[(r["benchmark"].split(".")[-1], int(r["params"]["threads"]))] = r["primaryMetric"]["score"]
ENGINE = load(f"{out}/engine/engine.json") or {}
E200 = load(f"{out}/engine200/engine.json") or {}
SPEC = load(f"{out}/spec/engine.json") or {}
CITEST = load(f"{root}/target/ci-test.json")

# ---------------------------------------------------------------- the table

rows = []  # (target, before, after, C, ratio, goal, met, limit)


def fmt(v, unit="", nd=None):
    if v is None:
        return "-"
    if nd is None:
        nd = 3 if abs(v) < 10 else 1 if abs(v) < 1000 else 0
    return f"{v:.{nd}f}{unit}"


def row(target, before, after, c, ratio, goal, met, limit=""):
    rows.append((target, before, after, c, ratio, goal, "MET" if met is True else "NOT MET" if met is False else met, limit))


def ratio_row(target, before, a, c, goal, limit="", unit=" ms"):
    if a is None or c is None:
        row(target, before, fmt(a, unit), fmt(c, unit), "-", f"<= {goal}x", "not measured", limit)
        return None
    r = a / c
    row(target, before, fmt(a, unit), fmt(c, unit), f"{r:.2f}x", f"<= {goal}x", r <= goal, limit)
    return r


# C engine v1.0.0 on this machine class (interleaved A/B, 7 runs, medians), measured before this work: a reference
# point, not a same-run ratio (the C engine is not in this repository). Before = k3j at the start of the work.
C_ENGINE = {("tiny-k3 12+20", 1): dict(wall=0.114, prefill=46, last5=1.62, rss=12), ("tiny-k3 12+20", 2): dict(prefill=66, last5=1.77, rss=12),
            ("mini-k3-93 8+8", 1): dict(prefill=80, last5=6.34, rss=14), ("mini-k3-93 8+8", 2): dict(prefill=132, last5=7.52, rss=14)}
BEFORE = {("tiny-k3 12+20", 1): dict(wall="3.88 s (34x)", prefill=2213, last5=13.8, rss=553), ("tiny-k3 12+20", 2): dict(wall="36x", prefill=2768, last5=20.8, rss=607),
          ("mini-k3-93 8+8", 1): dict(wall="23x", prefill=2298, last5=75.6, rss=592), ("mini-k3-93 8+8", 2): dict(wall="17x", prefill=2395, last5=45.0, rss=514)}
RANGES = {(1, 19): (39.6, 1.88), (20, 49): (16.9, 1.73), (50, 99): (5.40, 1.72), (100, 199): (5.04, 1.85)}

for case in ("tiny-k3 12+20", "mini-k3-93 8+8"):
    for t in (1, 2):
        s = (ENGINE.get(f"{case} | {t}") or {}).get("k3j")
        c, b = C_ENGINE[(case, t)], BEFORE[(case, t)]
        name = f"{case.split()[0]} {case.split()[1]}, {t}T"
        if not s:
            row(f"whole job {name}", b["wall"], "-", "-", "-", "<= 3x C", "not measured")
            continue
        lim = f"TTFT {s['ttft']:.2f} s, prefill {s['prefill_ms']:.0f} ms, CPU {s['cpu']:.2f} s of {s['wall']:.2f} s wall"
        if c.get("wall"):
            ratio_row(f"whole job {name} (wall, JVM start incl.)", b["wall"], s["wall"], c["wall"], 3, lim, unit=" s")
        else:
            row(f"whole job {name} (wall, JVM start incl.)", b["wall"], fmt(s["wall"], " s"), "not in the reference", "-", "<= 3x C", "no C figure", lim)
        row(f"prefill {name} (part of the whole job)", fmt(b["prefill"], " ms"), fmt(s["prefill_ms"], " ms"), fmt(c["prefill"], " ms"),
            f"{s['prefill_ms'] / c['prefill']:.2f}x", "-", "REPORTED", "the first forward: interpreted and C1 code while C2 compiles")
        ratio_row(f"decode 1st generated token {name}", "-", s.get("decode_first"), c["last5"], 1.2, "C: its last-5 figure (flat from the 1st token)")
        ratio_row(f"decode last 5 steps {name}", fmt(b["last5"], " ms"), s["decode_last5"], c["last5"], 1.2, "")
        r = s["rss_mb"]
        row(f"peak RSS {name}", f"{b['rss']} MB", f"{r:.0f} MB", f"{c['rss']} MB", "-", "<= 150 MB", r <= 150, "")
s = (E200.get("tiny-k3 12+200 | 1") or {}).get("k3j")
for (a, b2), (before, c) in RANGES.items():
    ratio_row(f"decode steps {a}-{b2}, tiny 12+200, 1T", fmt(before, " ms"), s.get(f"r{a}_{b2}") if s else None, c, 1.2, "")

# kernels
PEER_BYTES = {k: peer_kernels.BYTES[k] for k in ("bf16", "lmhead")}
BEFORE_K = {("bf16", 1): 1.06, ("bf16", 2): 1.07, ("lmhead", 1): 0.92, ("lmhead", 2): 1.26, ("kda_dram", 1): 1.11, ("kda_dram", 2): 1.44,
            ("kda_hot", 1): 0.81, ("kda_hot", 2): 0.95, ("mxfp4", 1): 1.71, ("mxfp4", 2): 1.74, ("mxfp4_int8", 1): None, ("mxfp4_int8", 2): None}
GOAL = {"bf16": 1.05, "lmhead": 1.05, "kda_dram": 1.05, "kda_hot": 1.05, "mxfp4": 1.2, "mxfp4_int8": 1.2}
LABEL = {"bf16": "bf16 matvec 7168x12288", "lmhead": "LM head 7168x163840", "kda_dram": "KDA step, 16 layers of state (DRAM)",
         "kda_hot": "KDA step, state hot", "mxfp4": "MXFP4 16 experts, nibble codes", "mxfp4_int8": "MXFP4 16 experts, int8-predecoded codes"}
for k in ("bf16", "lmhead", "kda_dram", "kda_hot", "mxfp4", "mxfp4_int8"):
    for t in (1, 2):
        j, c = K.get(("JAVA", k, t)), K.get(("PEER", "mxfp4" if k == "mxfp4_int8" else k, t))
        check = CHECKS.get("kda_o" if k.startswith("kda") else k)
        lim = "bits equal to C" if check == 0 else (f"{check} outputs differ from C" if check is not None else "no bit check")
        if k in PEER_BYTES and j and BW.get(t):
            lim += f"; Java {PEER_BYTES[k] / j / 1e6:.1f} GB/s, C {PEER_BYTES[k] / c / 1e6:.1f} GB/s of {BW[t]:.1f} read" if c else ""
        if k.startswith("mxfp4") and j:
            lim += f"; {j / 16:.2f} ms/expert"
        b = BEFORE_K.get((k, t))
        ratio_row(f"kernel {LABEL[k]}, {t}T (Java/C min)", f"{b:.2f}x" if b else "-", j, c, GOAL[k], lim)
j = K.get(("JAVA", "bf16", 2))
if j and BW.get(2):
    pct = PEER_BYTES["bf16"] / j / 1e6 / BW[2] * 100
    row("bf16 matvec, % of DRAM read bandwidth, 2T", "-", f"{pct:.0f} %", f"C {PEER_BYTES['bf16'] / K[('PEER', 'bf16', 2)] / 1e6 / BW[2] * 100:.0f} %" if K.get(("PEER", "bf16", 2)) else "-",
        "-", ">= 70 %", pct >= 70, f"read bandwidth {BW[2]:.1f} GB/s (peer's probe, this run)")
else:
    row("bf16 matvec, % of DRAM read bandwidth, 2T", "-", "-", "-", "-", ">= 70 %", "not measured", "; ".join(KNOTES))

# LatentMoE at real width
for t in (1, 2):
    hit, res, rep, i8 = (MOE.get((n, t)) for n in ("latentMoeCacheHit", "latentMoeResident", "latentMoeRepackPerCall", "latentMoeCacheHitInt8"))
    if hit and res:
        row(f"no repack on cache hits: LatentMoE ms/token, real width, {t}T", f"548 ms (repack per get) vs 238 resident" if t == 2 else "-",
            f"{hit:.0f} ms (hit)", "-", f"{hit / res:.2f}x resident", "<= 1.1x resident", hit / res <= 1.1,
            f"resident {res:.0f} ms; repack per call {rep:.0f} ms; int8 slots {i8:.0f} ms" if rep and i8 else "")
    else:
        row(f"no repack on cache hits, {t}T", "548 vs 238 ms", "-", "-", "-", "<= 1.1x resident", "not measured", "see moe.log")

# speculative decoding
sp = SPEC.get("mini-k3-93 spec | 1") or {}
if sp.get("plain") and sp.get("spec4"):
    a, b = sp["plain"], sp["spec4"]
    d, acc = (b["spec"][1], b["spec"][2]) if b.get("spec") else (0, 0)
    same = a["ids"] == b["ids"]
    row("--spec 4 on a repetitive prompt (mini, 40 ids, 1T)", "no --spec", f"{acc}/{d} drafts accepted", "-",
        f"decode {a['decode_s'] / b['decode_s']:.2f}x faster", "ids identical; report", same and "REPORTED" or "IDS DIFFER",
        f"decode {a['decode_s'] * 1000:.0f} ms plain vs {b['decode_s'] * 1000:.0f} ms --spec; free-running greedy on these oracles repeats no 3-gram")

# real width
scale_txt = f"{out}/scale.txt"
if os.path.exists(scale_txt):
    text = open(scale_txt).read()
    sdir = text.split("\n", 1)[0].split(" ", 1)[1]
    steps = [float(m.group(1)) * 1000 for m in re.finditer(r"^\d+\s+\d+\s+\d+\s+([\d.]+)\s", text, re.M)]
    if "SCALEFAILED" in text or len(steps) < 2:
        row("real-width decode vs C peer kernel sum, 2T", "-", "-", "-", "-", "<= 1.1x", "not measured", "k3 run on the scale fixture failed: see scale.txt")
    else:
        cfg = json.load(open(f"{sdir}/config.json"))
        tc = cfg.get("text_config", cfg)
        idx = json.load(open(f"{sdir}/model.safetensors.index.json"))["weight_map"]
        bf16 = lm = 0
        moe_layers = set()
        for shard in sorted(set(idx.values())):
            with open(f"{sdir}/{shard}", "rb") as f:
                n = int.from_bytes(f.read(8), "little")
                hdr = json.loads(f.read(n))
            for name, info in hdr.items():
                if name == "__metadata__":
                    continue
                size = info["data_offsets"][1] - info["data_offsets"][0]
                m = re.search(r"layers\.(\d+)\.", name)
                if re.search(r"\.experts\.\d+\.", name):
                    moe_layers.add(m.group(1))
                elif "lm_head" in name and info["dtype"] == "BF16":
                    lm += size
                elif m and info["dtype"] == "BF16":
                    bf16 += size
        kda = len(tc.get("linear_attn_config", {}).get("kda_layers", []))
        c2 = {k: K.get(("PEER", k, 2)) for k in ("bf16", "lmhead", "mxfp4", "kda_dram")}
        dec = statistics.mean(steps[1:])
        if all(c2.values()):
            parts = dict(bf16=bf16 / PEER_BYTES["bf16"] * c2["bf16"], lmhead=c2["lmhead"] * lm / PEER_BYTES["lmhead"],
                         mxfp4=len(moe_layers) * c2["mxfp4"], kda=kda * c2["kda_dram"])
            peer = sum(parts.values())
            ratio_row("real-width decode (scale fixture) vs sum of C peer kernels, 2T", "not measured", dec, peer, 1.1,
                      f"decode steps {', '.join(f'{x:.0f}' for x in steps[1:])} ms; peer sum = bf16 {bf16 / 1e9:.2f} GB {parts['bf16']:.0f} ms + LM head {parts['lmhead']:.0f} ms "
                      f"+ {len(moe_layers)} MoE layers x 16 experts {parts['mxfp4']:.0f} ms + {kda} KDA steps {parts['kda']:.0f} ms")
        else:
            row("real-width decode vs C peer kernel sum, 2T", "-", fmt(dec, " ms"), "-", "-", "<= 1.1x", "not measured", "no C peer figures in this run")
else:
    row("real-width decode vs C peer kernel sum, 2T", "not measured", "-", "-", "-", "<= 1.1x", "not measured",
        "no scale fixture (K3_SCALE=DIR, default build/scale-k3; ci/bench --make-scale generates it: minutes, ~8 GB)")

# the weightless suite
if CITEST:
    lng = CITEST["longest"][0] if CITEST["longest"] else None
    row("ci/test wall (weightless suite)", "104 s", f"{CITEST['wall_s']:.0f} s", "-", "-", "<= 120 s", CITEST["wall_s"] <= 120 and CITEST["exit"] == 0,
        f"last run {CITEST['when']}, exit {CITEST['exit']}, {CITEST['tests']} tests, load {CITEST['load'][0]:.1f}")
    sil = CITEST.get("silence")
    if sil:
        row("longest console silence in ci/test", "-", f"{sil['seconds']:.0f} s", "-", "-", "<= 30 s", sil["seconds"] <= 30,
            f"after: {sil['after'][:90]}" + (f"; longest class {lng['name']} {lng['seconds']:.0f} s" if lng else ""))
    elif lng:
        row("longest silent gate class in ci/test", "-", f"{lng['seconds']:.0f} s", "-", "-", "<= 30 s", lng["seconds"] <= 30, lng["name"])
else:
    row("ci/test wall (weightless suite)", "104 s", "-", "-", "-", "<= 120 s", "not measured", "run ci/test first (it writes target/ci-test.json)")

# ---------------------------------------------------------------- print

hdr = ("target", "before", "after", "C", "ratio", "goal", "met?", "what bounds it (measured)")
w = [max(len(str(r[i])) for r in rows + [hdr]) for i in range(7)]
print()
print("k3j speed table (ci/bench). Kernel C = the repository's C peer (bench/peer), same run, same inputs, same contract;")
print("whole-job C = the C engine v1.0.0 on this machine class, measured before this work: a REFERENCE POINT, not a same-run ratio.")
print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
print("  ".join(h.ljust(w[i]) if i < 7 else h for i, h in enumerate(hdr)))
for r in rows:
    print("  ".join(str(v).ljust(w[i]) if i < 7 else str(v) for i, v in enumerate(r)))
met = sum(1 for r in rows if r[6] == "MET")
print(f"\n{met} of {sum(1 for r in rows if r[6] in ('MET', 'NOT MET'))} measured target rows met; "
      f"{sum(1 for r in rows if r[6] not in ('MET', 'NOT MET', 'REPORTED'))} rows not measured here.")
for n in KNOTES:
    print("note:", n)

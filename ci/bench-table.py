"""ci/bench's table: JMH (SampleTime, p0 = min, p50 = median) against the C peer's min/median, same shapes."""
import json, re, sys, glob, os

out = sys.argv[1]

def peer(threads):
    """label -> list of (min_ms, median_ms) over the runs in this window; plus the stream read GB/s."""
    rows, bw = {}, []
    for f in sorted(glob.glob(f"{out}/peer*-{threads}.txt")):
        for line in open(f):
            m = re.match(r"(.+?)\s+median\s+([\d.]+) ms\s+min\s+([\d.]+) ms", line)
            if m:
                rows.setdefault(m.group(1).strip(), []).append((float(m.group(3)), float(m.group(2))))
            m = re.search(r"read\(sum\) ([\d.]+) GB/s", line)
            if m:
                bw.append(float(m.group(1)))
    return {k: (min(a for a, _ in v), sorted(b for _, b in v)[len(v) // 2]) for k, v in rows.items()}, (max(bw) if bw else None)

# bytes streamed per call (weights / state), for GB/s
BYTES = {
    "bf16_7168x12288": 7168 * 12288 * 2,
    "lmhead_7168x163840": 7168 * 163840 * 2,
    "prefill_bf16_7168x12288": 7168 * 12288 * 2,
    "mxfp4_16experts": 16 * 17547264,
    "kda_96x128x128_hot": 96 * 128 * 128 * 4 * 2,
    "kda_16layers_dram": 16 * 96 * 128 * 128 * 4 * 2,
    "mla_attention": None,
}
PEER = {
    "bf16_7168x12288": "bf16 7168x12288 x4rows",
    "lmhead_7168x163840": "lmhead 7168x163840 x4rows chunks",
    "mxfp4_16experts": "mxfp4 16 experts avx2 x-rows",
    "kda_96x128x128_hot": "kda 96x128x128 fused hot(L3)",
    "kda_16layers_dram": "kda 16 layers fused (DRAM)",
}

jmh = json.load(open(f"{out}/jmh.json"))
peers = {t: peer(t) for t in (1, 2)}
print()
print(f"{'kernel':42} {'thr':>3} {'Java min/med ms':>18} {'C min/med ms':>18} {'Java/C':>7} {'GB/s':>7} {'%BW':>5}")
for r in jmh:
    name = r["benchmark"].split(".")[-1]
    if name not in BYTES:
        continue
    p = r.get("params", {})
    t = int(p.get("threads", 1))
    extra = ",".join(f"{k}={v}" for k, v in p.items() if k != "threads")
    pct = r["primaryMetric"]["scorePercentiles"]
    jmin, jmed = pct["0.0"], pct["50.0"]
    cmap, bw = peers[t]
    c = cmap.get(PEER.get(name, ""), None)
    ratio = f"{jmin / c[0]:.2f}" if c else "-"
    cs = f"{c[0]:.2f}/{c[1]:.2f}" if c else "-"
    b = BYTES[name]
    gbs = b / (jmin * 1e-3) / 1e9 if b else None
    print(f"{name + ('[' + extra + ']' if extra else ''):42} {t:>3} {jmin:8.2f}/{jmed:<9.2f} {cs:>18} {ratio:>7} "
          f"{(f'{gbs:.1f}' if gbs else '-'):>7} {(f'{100 * gbs / bw:.0f}' if gbs and bw else '-'):>5}")
for t in (1, 2):
    print(f"measured DRAM read bandwidth ({t} thread(s), best of the window): {peers[t][1]} GB/s")

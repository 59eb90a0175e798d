"""Whole-engine benchmark: k3 run on the tiny and mini oracles, as a user runs it (JVM start included).

Each run's stdout is read line by line as it arrives: wall time, time to first token (process start to the
first STEP row), prefill (step 0's own seconds), decode ms/token by step range and peak RSS (the kernel's
ru_maxrss of the child). Variants run interleaved (A B A B ...), so a noisy neighbour hits them alike; the
table quotes medians over the repeats and, per variant, the ratio to the first variant.

usage: bench-engine.py OUT_DIR REPEATS VARIANT=CMD... (CMD is a shell word list run with the model arguments
appended; the caller builds it). Writes OUT_DIR/engine.json and prints the table.
"""
import json, os, re, shlex, statistics, subprocess, sys, time

CASES = {
    # name: (model dir relative to the repository, ids, generated tokens)
    "tiny-k3 12+20": ("oracle-fixtures/tiny-k3", "250,17,101,3,199,64,128,42,7,230,88,155", 20),
    "tiny-k3 12+200": ("oracle-fixtures/tiny-k3", "250,17,101,3,199,64,128,42,7,230,88,155", 200),
    "mini-k3-93 8+8": ("oracle-fixtures/mini-k3-93", "1,2,3,4,5,6,7,8", 8),
    # a repetitive prompt for speculative decoding: P, mini's own greedy continuation of P (24 ids), P again; the
    # n-gram drafter proposes what followed P the first time (random-weight oracles never repeat themselves in
    # free-running greedy output: 0 drafts over 400 tiny ids and 150 mini ids)
    "mini-k3-93 spec": ("oracle-fixtures/mini-k3-93", "1,2,3,4,5,6,7,8,79,126,53,70,42,5,14,14,108,39,99,40,132,126,85,95,143,6,40,36,53,120,147,113,"
                        "1,2,3,4,5,6,7,8", 40),
}
RANGES = [(1, 19), (20, 49), (50, 99), (100, 199)]
STEP = re.compile(r"^(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s")
SPEC = re.compile(r"speculative \(--spec \d+\): (\d+) verifying forwards, (\d+) ids drafted, (\d+) accepted")

# The C engine v1.0.0 on this machine class, measured before k3j's speed work (interleaved A/B, 7 runs, medians):
# a reference point, NOT a same-run ratio (the C engine is not part of this repository).
C_ENGINE = {
    ("tiny-k3 12+20", 1): dict(wall=0.114, prefill_ms=46, decode_last5=1.62, rss_mb=12),
    ("tiny-k3 12+20", 2): dict(prefill_ms=66, decode_last5=1.77, rss_mb=12),
    ("mini-k3-93 8+8", 1): dict(prefill_ms=80, decode_last5=6.34, rss_mb=14),
    ("mini-k3-93 8+8", 2): dict(prefill_ms=132, decode_last5=7.52, rss_mb=14),
    ("tiny-k3 12+200", 1): dict(r1_19=1.88, r20_49=1.73, r50_99=1.72, r100_199=1.85),
}


def run(cmd, root):
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ttft, steps, ids, spec = None, [], None, None
    for line in p.stdout:
        m = STEP.match(line)
        if m:
            if ttft is None:
                ttft = time.monotonic() - t0
            steps.append(float(m.group(4)) * 1000)  # the step's own seconds, as ms
        elif line.startswith("generated ids:"):
            ids = line.split(":", 1)[1].strip()
        elif SPEC.search(line):
            spec = [int(g) for g in SPEC.search(line).groups()]
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    if os.waitstatus_to_exitcode(status) != 0 or not steps:
        raise SystemExit(f"bench-engine: {' '.join(cmd)} failed (exit {os.waitstatus_to_exitcode(status)})")
    return dict(wall=wall, ttft=ttft, prefill_ms=steps[0], steps=steps, rss_mb=ru.ru_maxrss / 1024, ids=ids,
                cpu=ru.ru_utime + ru.ru_stime, spec=spec, decode_s=sum(steps[1:]) / 1000)


def summary(runs):
    med = lambda k: statistics.median(r[k] for r in runs)
    s = dict(wall=med("wall"), ttft=med("ttft"), prefill_ms=med("prefill_ms"), rss_mb=max(r["rss_mb"] for r in runs), cpu=med("cpu"))
    steps = [r["steps"] for r in runs]
    n = len(steps[0])
    s["decode_first"] = statistics.median(st[1] for st in steps) if n > 1 else None
    s["decode_last5"] = statistics.median(statistics.mean(st[max(1, n - 5):]) for st in steps) if n > 1 else None
    for a, b in RANGES:
        if n > a:
            s[f"r{a}_{b}"] = statistics.median(statistics.mean(st[a:min(n, b + 1)]) for st in steps)
    s["ids"] = sorted({r["ids"] for r in runs})
    s["decode_s"] = med("decode_s")
    s["spec"] = runs[0]["spec"]
    return s


def main():
    out, repeats, variants = sys.argv[1], int(sys.argv[2]), [a.split("=", 1) for a in sys.argv[3:]]
    os.makedirs(out, exist_ok=True)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    threads = [int(t) for t in os.environ.get("K3_BENCH_THREADS", "1 2").split()]
    cases = os.environ.get("K3_BENCH_CASES", "|".join(CASES)).split("|")
    results = {}
    for case in cases:
        model, ids, gen = CASES[case]
        for t in threads:
            runs = {name: [] for name, _ in variants}
            for _ in range(repeats):
                for name, cmd in variants:
                    args = shlex.split(cmd) + [model, "--ids", ids, "--gen", str(gen), "--incremental", "--threads", str(t),
                                               "--out", os.path.join(out, "run.json")]
                    runs[name].append(run(args, root))
            results[f"{case} | {t}"] = {name: summary(r) for name, r in runs.items()}
    json.dump(results, open(os.path.join(out, "engine.json"), "w"), indent=1)
    report(results, [name for name, _ in variants])


def fmt(v, unit=""):
    return "-" if v is None else (f"{v:.3f}{unit}" if v < 10 else f"{v:.1f}{unit}")


def report(results, names):
    print()
    print("Whole engine, medians over interleaved repeats (wall and TTFT include JVM start; RSS = max ru_maxrss).")
    print("C engine columns: the C engine v1.0.0 measured on this machine class before this work - a REFERENCE POINT,")
    print("not a same-run ratio (the C engine is not in this repository).")
    hdr = f"{'case | threads':22} {'variant':10} {'wall s':>7} {'TTFT s':>7} {'prefill ms':>10} {'1st dec':>8} {'last5':>7} {'1-19':>7} {'20-49':>7} {'50-99':>7} {'100-199':>7} {'RSS MB':>7} {'cpu s':>6}"
    print(hdr)
    for key, by in results.items():
        case, t = key.split(" | ")
        for name in names:
            s = by[name]
            print(f"{key:22} {name:10} {fmt(s['wall']):>7} {fmt(s['ttft']):>7} {fmt(s['prefill_ms']):>10} "
                  f"{fmt(s['decode_first']):>8} {fmt(s['decode_last5']):>7} "
                  + " ".join(f"{fmt(s.get(f'r{a}_{b}')):>7}" for a, b in RANGES)
                  + f" {s['rss_mb']:7.0f} {fmt(s['cpu']):>6}")
        c = C_ENGINE.get((case, int(t)))
        if c:
            print(f"{key:22} {'C engine':10} {fmt(c.get('wall')):>7} {'-':>7} {fmt(c.get('prefill_ms')):>10} {'-':>8} {fmt(c.get('decode_last5')):>7} "
                  + " ".join(f"{fmt(c.get(f'r{a}_{b}')):>7}" for a, b in RANGES) + f" {c.get('rss_mb', 0):7.0f}")
            base = by[names[-1]]
            ratios = []
            if c.get("wall"): ratios.append(f"wall {base['wall'] / c['wall']:.1f}x")
            if c.get("decode_last5") and base["decode_last5"]: ratios.append(f"decode(last 5) {base['decode_last5'] / c['decode_last5']:.2f}x")
            if c.get("decode_last5") and base["decode_first"]: ratios.append(f"decode(1st) {base['decode_first'] / c['decode_last5']:.2f}x")
            if c.get("prefill_ms"): ratios.append(f"prefill {base['prefill_ms'] / c['prefill_ms']:.1f}x")
            for a, b in RANGES:
                if c.get(f"r{a}_{b}") and base.get(f"r{a}_{b}"): ratios.append(f"steps {a}-{b} {base[f'r{a}_{b}'] / c[f'r{a}_{b}']:.2f}x")
            print(f"{'':22} {names[-1]} / C engine (reference point): " + ", ".join(ratios))
        ids = {name: by[name]["ids"] for name in names}
        if len({tuple(v) for v in ids.values()}) != 1 or any(len(v) != 1 for v in ids.values()):
            print(f"{'':22} WARNING: generated ids differ between runs or variants: {ids}")
    print()


if __name__ == "__main__":
    main()

"""The serving table of ci/bench-serve: k3 serve on loopback, driven by 1, 2, 4 and 8 concurrent streams.

Per model and concurrency: the server's CPU milliseconds per id (the figure a loaded machine does not inflate), aggregate decode ids/s (the ids after each stream's first, over the span from the first
stream's first id to the last stream's end), the batch's step time (decode span / steps), the bytes of weights one
step read (/metrics k3_step_bytes_read, median while the streams ran), time to first token (median over the
streams) and the server's CPU seconds for that level (/proc). Beside them: `k3 run`'s and the C engine's
one-sequence rate on the same ids. Wall times on a loaded machine are inflated: the load average is printed.

One stream through the server is set against `k3 run` by decode step time alone, under the same memory plan
(the same --cache-gb, threads and resident trunk): the server's from the arrival of each streamed id, `k3 run`'s
from its STEP table; both leave out the prefill step and the first decode step after it (DECODE_FROM), so neither
start-up, prefill nor the first step's warm-up enters the ratio. Each measured pass follows an unmeasured one on the
same ids in its own mode (the server's warm-up stream, a first `k3 run`), so both read the experts those ids route
to from a page cache that has seen them: on the scale fixture the 47 GB of routed experts do not fit in memory, and
whichever ran second would otherwise find the other's reads cached.
"""
import json, os, re, signal, statistics, subprocess, sys, threading, time, urllib.request
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_run import Run

out, root = sys.argv[1], sys.argv[2]
k3 = os.path.join(root, "bin", "k3")
quick = os.environ.get("K3_BENCH_QUICK") == "1"
cengine = os.environ.get("K3_C_ENGINE") or None
if cengine and not os.access(cengine, os.X_OK):
    sys.exit(f"bench-serve: K3_C_ENGINE={cengine} is not an executable")
scale = os.environ.get("K3_SCALE") or os.path.join(root, "build", "scale-k3")
LEVELS = [1, 2, 4, 8]
DECODE_FROM = 2   # the first id whose step is timed: 0 comes out of the prefill step, 1 out of the first decode step after it
load_before = open("/proc/loadavg").read().split()[:3]


def cpu_seconds(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def metrics(base):
    text = urllib.request.urlopen(base + "/metrics", timeout=60).read().decode()
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"^(k3_\w+) (\S+)$", text, re.M)}


def stream(base, ids, gen, rec):
    body = json.dumps({"prompt": ids, "max_tokens": gen, "temperature": 0, "ignore_eos": True, "stream": True}).encode()
    req = urllib.request.Request(base + "/v1/completions", body, {"Content-Type": "application/json"})
    t0 = time.monotonic()
    n, first, arrivals = 0, None, []
    with urllib.request.urlopen(req, timeout=3600) as r:
        for line in r:
            line = line.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            j = json.loads(line[6:])
            if "error" in j:
                raise RuntimeError(j["error"]["message"])
            k = sum(len(c.get("token_ids") or []) for c in j["choices"])
            now = time.monotonic()
            if k and first is None:
                first = now
            n += k
            arrivals += [now] * k
    rec.update(start=t0, first=first, end=time.monotonic(), ids=n, arrivals=arrivals)


def level(base, pid, c, gen, prompt_len):
    recs = [dict() for _ in range(c)]
    before, cpu0 = metrics(base), cpu_seconds(pid)
    bytes_seen, done = [], threading.Event()

    def sample():
        while not done.is_set():
            m = metrics(base)
            if m.get("k3_active_sequences", 0) > 0 and m.get("k3_step_bytes_read", 0) > 0:
                bytes_seen.append(m["k3_step_bytes_read"])
            done.wait(0.25)

    threads = [threading.Thread(target=stream, args=(base, [(7 * i + j) % 200 + 1 for j in range(prompt_len)], gen, recs[i])) for i in range(c)]
    s = threading.Thread(target=sample)
    s.start()
    for t in threads: t.start()
    for t in threads: t.join()
    done.set()
    s.join()
    after, cpu1 = metrics(base), cpu_seconds(pid)
    if any(r.get("ids") != gen for r in recs):
        raise RuntimeError(f"{c} streams: ids per stream {[r.get('ids') for r in recs]}, asked {gen}")
    span = max(r["end"] for r in recs) - min(r["first"] for r in recs)
    decoded = sum(r["ids"] - 1 for r in recs)
    steps = after["k3_steps_total"] - before["k3_steps_total"]
    # per stream, from the arrival of id DECODE_FROM - 1 to the last: the mean time of the decode steps timed (ids
    # that arrive in one chunk share its time; only the two ends count)
    decode_step_s = statistics.median((r["arrivals"][-1] - r["arrivals"][DECODE_FROM - 1]) / (gen - DECODE_FROM) for r in recs)
    return dict(streams=c, ids_per_s=decoded / span, step_s=span / max(1, gen - 1), decode_step_s=decode_step_s, steps=steps,
                bytes_per_step=statistics.median(bytes_seen) if bytes_seen else None,
                ttft_s=statistics.median(r["first"] - r["start"] for r in recs), cpu_s=cpu1 - cpu0, cpu_ms_per_id=(cpu1 - cpu0) * 1000 / (c * gen), wall_s=max(r["end"] for r in recs) - min(r["start"] for r in recs))


def one_sequence(cmd, path, env=None):
    t0 = time.monotonic()
    subprocess.run(cmd + ["--out", path], cwd=root, check=True, capture_output=True, env=env, timeout=3600)
    j = json.load(open(path))
    spt = j.get("seconds_per_token") or (time.monotonic() - t0) / max(1, len(j["generated_ids"]))
    return 1 / spt


def run_decode_step(cmd, name, gen):
    """`k3 run`'s mean decode step time from its STEP table, steps DECODE_FROM.. (prefill and the first decode step left out)."""
    r = Run(cmd, root, out, name=name)
    rows = r.steps(gen)
    return statistics.fmean(secs for step, _, secs, _ in rows if step >= DECODE_FROM)


def model(name, path, gen, prompt_len, extra, serve_extra):
    """`extra`: the memory plan and threads, the same for the server and `k3 run`; `serve_extra`: the server's limits."""
    if gen <= DECODE_FROM:
        sys.exit(f"bench-serve: {gen} ids per stream leave no decode step after the first to time")
    row = dict(model=name)
    if not os.path.isfile(os.path.join(path, "config.json")):
        row["missing"] = f"NOT MEASURED: no fixture at {path} (ci/bench --make-scale makes it)"
        return row
    p = subprocess.Popen([k3, "serve", path, "--port", "0", "--max-active", "8", "--max-queued", "8"] + serve_extra + extra,
                         cwd=root, stdout=subprocess.PIPE, stderr=open(os.path.join(out, f"serve-{name}.log"), "w"), text=True)
    try:
        line = p.stdout.readline()
        m = re.search(r"listening on (http://\S+)", line)
        if not m:
            row["missing"] = "NOT MEASURED: the server did not start (see serve-" + name + ".log)"
            return row
        base = m.group(1)
        level(base, p.pid, 1, gen, prompt_len)   # warm-up on the measured stream's ids: JIT, caches
        row["levels"] = [level(base, p.pid, c, gen, prompt_len) for c in LEVELS]
    except Exception as e:
        row["missing"] = f"NOT MEASURED: {e}"
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            row["exit"] = p.wait(timeout=600)
        except subprocess.TimeoutExpired:
            p.kill()
            row["exit"] = "killed"
    ids = ",".join(str((j % 200) + 1) for j in range(prompt_len))
    try:
        cmd = [k3, path, "--ids", ids, "--gen", str(gen), "--ignore-eos"] + extra + ["--out", os.path.join(out, f"serve-run-{name}.json")]
        run_decode_step(cmd, f"serve-run-{name}-warm-up", gen)
        row["run_decode_step_s"] = run_decode_step(cmd, f"serve-run-{name}", gen)
    except Exception as e:
        row["run_note"] = f"NOT MEASURED: {e}"
    if cengine:
        try:
            row["c_ids_per_s"] = one_sequence([cengine, path, "--ids", ids, "--gen", str(gen), "--incremental", "--cache-gb", "4"],
                                              os.path.join(out, f"serve-c-{name}.json"), dict(os.environ, OMP_NUM_THREADS="2"))
        except Exception as e:
            row["c_note"] = f"failed: {e}"
    return row


# The scale fixture's plan: the resident trunk and a 4 GB expert cache, for the server and `k3 run` alike; the
# server's context and prefill chunk cover this bench's sequences (8 + gen ids), so 8 slots' KV and one step's
# buffers stay small beside the weights. A step decodes one id per sequence whatever the context.
SCALE_GEN = 4 if quick else 12
rows = [model("mini-k3-93", os.path.join(root, "oracle-fixtures", "mini-k3-93"), 8 if quick else 24, 8, ["--threads", "2"], []),
        model("scale-k3", scale, SCALE_GEN, 8, ["--threads", "2", "--cache-gb", "4"], ["--context", str(8 + SCALE_GEN), "--prefill-chunk", "8"])]
load_after = open("/proc/loadavg").read().split()[:3]
json.dump(dict(rows=rows, load_before=load_before, load_after=load_after, c_engine=cengine), open(os.path.join(out, "serve.json"), "w"), indent=1)

lines = [f"k3 serve, concurrent streams (load average before {' '.join(load_before)}, after {' '.join(load_after)}; 2 worker threads; "
         "wall figures on a loaded machine are inflated, CPU seconds beside them)", ""]
lines.append(f"{'model':<12} {'streams':>7} {'decode ids/s':>12} {'x 1 stream':>10} {'step ms':>8} {'MB/step':>8} {'TTFT ms':>8} {'server CPU s':>12} {'CPU ms/id':>9}")
for r in rows:
    if "missing" in r and "levels" not in r:
        lines.append(f"{r['model']:<12} {r['missing']}")
        continue
    one = r["levels"][0]["ids_per_s"]
    for l in r["levels"]:
        mb = f"{l['bytes_per_step'] / 1e6:.1f}" if l["bytes_per_step"] else "-"
        lines.append(f"{r['model']:<12} {l['streams']:>7} {l['ids_per_s']:>12.2f} {l['ids_per_s'] / one:>10.2f} {l['step_s'] * 1000:>8.1f} {mb:>8} "
                     f"{l['ttft_s'] * 1000:>8.0f} {l['cpu_s']:>12.1f} {l['cpu_ms_per_id']:>9.1f}")
    run = r.get("run_decode_step_s")
    c = r.get("c_ids_per_s")
    lines.append(f"{'':<12} k3 run, one sequence: decode step " + (f"{run * 1000:.1f} ms" if run else r.get("run_note", "-"))
                 + f" (STEP table, steps {DECODE_FROM}+); C engine, one sequence: "
                 + (f"{c:.2f} ids/s" if c else r.get("c_note", "no K3_C_ENGINE")) + f"; server exit {r.get('exit')}")
    eight = r["levels"][-1]["ids_per_s"] / one
    lines.append(f"{'':<12} 8 streams / 1 stream = {eight:.2f} (target >= 4 at the released widths: "
                 + ("MET" if eight >= 4 else "NOT MET") + (" — this is not the released width" if r["model"] != "scale-k3" else "") + ")")
    cpu8 = r["levels"][0]["cpu_ms_per_id"] / r["levels"][-1]["cpu_ms_per_id"]
    lines.append(f"{'':<12} server CPU per id, 1 stream / 8 streams = {cpu8:.2f} (the load-independent view of the same ratio)")
    served = r["levels"][0]["decode_step_s"]
    if run:
        lines.append(f"{'':<12} 1 stream's decode step through the server {served * 1000:.1f} ms / k3 run's {run * 1000:.1f} ms = {served / run:.3f} "
                     + f"(ids {DECODE_FROM}+ of each; target within 5 %: " + ("MET" if abs(served / run - 1) <= 0.05 else "NOT MET") + ")")
    else:
        lines.append(f"{'':<12} 1 stream through the server against k3 run: NOT MEASURED ({r.get('run_note')})")
text = "\n".join(lines)
print(text)
open(os.path.join(out, "serve.txt"), "w").write(text + "\n")

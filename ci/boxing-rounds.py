"""Sorts JFR allocation samples into ci/bench-boxing's rounds: per round, the MB allocated under a Vector API frame
(a boxed vector or the Java fallback's arrays) and the first engine frame that did it. Exit 1 when a round after the
warm-up allocated any, or when the input is missing or empty.
usage: boxing-rounds.py ROUNDS.txt ALLOC.json WARMUP_ROUNDS"""
import datetime
import json
import re
import sys
from collections import Counter

VECTOR = ("jdk.incubator.vector.", "jdk.internal.vm.vector.")


def fail(msg):
    print("boxing-rounds: " + msg, file=sys.stderr)
    sys.exit(2)


def epoch_ms(iso):
    return datetime.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000


def main():
    if len(sys.argv) != 4:
        fail(__doc__)
    rounds_file, alloc_file, warm = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rounds = []
    with open(rounds_file) as f:
        for line in f:
            m = re.match(r"ROUND (\d+) START (\d+) END (\d+) (.*)", line)
            if m:
                rounds.append((int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4)))
    if len(rounds) <= warm:
        fail(f"{rounds_file}: {len(rounds)} rounds, need more than the {warm} warm-up rounds")
    with open(alloc_file) as f:
        events = json.load(f)["recording"]["events"]
    if not events:
        fail(f"{alloc_file}: no allocation samples (was JFR recording?)")
    per_round = [0.0] * len(rounds)
    where = [Counter() for _ in rounds]
    for e in events:
        # jfr --json spells classes with slashes (jdk/incubator/vector/DoubleVector), hidden classes with dots
        frames = [(fr["method"]["type"]["name"] + "." + fr["method"]["name"]).replace("/", ".")
                  for fr in (e["values"]["stackTrace"] or {}).get("frames", [])]
        cls = e["values"]["objectClass"]["name"].replace("/", ".")
        if not (cls.startswith(VECTOR) or any(f.startswith(VECTOR) for f in frames)):
            continue
        t = epoch_ms(e["values"]["startTime"])
        for i, (_, start, end, _) in enumerate(rounds):
            if start <= t <= end:
                per_round[i] += e["values"]["weight"] / 1e6
                where[i][next((f for f in frames if f.startswith("k3j.")), "?")] += e["values"]["weight"] / 1e6
    bad = 0
    for i, (r, start, end, times) in enumerate(rounds):
        top = ", ".join(f"{k} {v:.0f} MB" for k, v in where[i].most_common(2))
        tag = "warm-up" if i < warm else ("BOXED" if per_round[i] > 0 else "clean")
        print(f"round {r}: {times} ms; vector allocations {per_round[i]:.1f} MB {tag}{' (' + top + ')' if top else ''}")
        if i >= warm and per_round[i] > 0:
            bad += 1
    walls = [end - start for _, start, end, _ in rounds[warm:]]
    print(f"after warm-up: {len(walls)} rounds, slowest/fastest {max(walls) / min(walls):.2f}x, rounds with boxed vectors: {bad}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Whether a merged run equals the one-machine run: same layers, ratios, findings and causes (the merge reads them from
every layer, as the one-machine run does), first divergence, verdict and logit/greedy blocks. Compares the two --json files (every field but timing) and the two printed summaries (from the
first ==== line, timing and the one-machine run's memory lines left out). Exit 0 equal, 1 different (the differences
printed), 2 a file missing or unreadable.
  same-verdict.py ONE.json ONE.txt MERGED.json MERGED.txt"""
import json, re, sys

# run_plan and verdict: the one-machine run's own plan (its run id) and decision; a merge writes its summary and shards instead
TIMING = ("seconds", "peak_rss_bytes", "plan", "trunk_binding", "expert_cache", "shards", "run_plan", "verdict")
# the decision block a one-machine run prints last (its findings, not-judged items and VERDICT line)
DECISION = re.compile(r"^  (finding|not judged) +: |^VERDICT: (CONFORMS|DOES NOT CONFORM|INCOMPLETE|REFUSED|WITHIN|OUTSIDE)\b")
TIME_TAIL = re.compile(r"\s+[0-9.]+ s( total)?(\s+\[.*)?$")


def canonical(path):
    d = json.load(open(path))
    for k in TIMING:
        d.pop(k, None)
    for layer in d["layers"]:
        layer.pop("seconds", None)
        layer["line"] = TIME_TAIL.sub(r"\2", layer["line"])
    return d


def summary(path):
    lines = open(path, encoding="utf-8").read().splitlines()
    try:
        start = next(i for i, l in enumerate(lines) if l.startswith("====="))
    except StopIteration:
        sys.exit(f"same-verdict: {path} has no summary (no ===== line)")
    keep = []
    for l in lines[start:]:
        if l.startswith(("expert cache:", "PEAK RSS", "wall time", "chart:")):
            continue
        keep.append(TIME_TAIL.sub(r"\2", l))
    while keep and (not keep[-1].strip() or DECISION.match(keep[-1])):
        keep.pop()
    return keep


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    try:
        a, b = canonical(sys.argv[1]), canonical(sys.argv[3])
        ta, tb = summary(sys.argv[2]), summary(sys.argv[4])
    except (OSError, ValueError, KeyError) as e:
        print(f"same-verdict: {e}", file=sys.stderr)
        sys.exit(2)
    bad = []
    if a["summary"] != b["summary"]:
        bad.append(f"summary: one machine {a['summary']}\n         merged      {b['summary']}")
    la, lb = {l["layer"]: l for l in a["layers"]}, {l["layer"]: l for l in b["layers"]}
    if sorted(la) != sorted(lb):
        bad.append(f"layers: one machine {sorted(la)}, merged {sorted(lb)}")
    for k in sorted(set(la) & set(lb)):
        if la[k] != lb[k]:
            bad.append(f"layer {k}: one machine {la[k]}\n         merged      {lb[k]}")
    if ta != tb:
        import difflib
        bad.append("printed summary:\n" + "\n".join(difflib.unified_diff(ta, tb, "one machine", "merged", lineterm="", n=1)))
    if bad:
        print("\n".join(bad))
        sys.exit(1)
    print(f"same verdict: {len(la)} layers, {a['summary']['verdict']}, summary {len(ta)} lines equal")


main()

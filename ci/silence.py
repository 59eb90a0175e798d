#!/usr/bin/env python3
"""Passes its input through and measures the longest silence: the most seconds between two console lines.
Usage: cmd | silence.py OUT.json   (written at end of input: seconds, and the line after which it fell)."""
import json, sys, time

longest, after, last, prev = 0.0, "", time.monotonic(), "(start)"
for line in sys.stdin:
    now = time.monotonic()
    if now - last > longest:
        longest, after = now - last, prev
    last, prev = now, line.rstrip("\n")[:200]
    sys.stdout.write(line)
    sys.stdout.flush()
with open(sys.argv[1], "w") as f:
    json.dump(dict(seconds=longest, after=after), f, indent=1)

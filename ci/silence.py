#!/usr/bin/env python3
"""Passes its input through and measures the longest silence: the most seconds between two console lines.
Usage: cmd | silence.py OUT.json   (written at end of input: seconds, and the line after which it fell).
Ctrl-C reaches the whole pipeline: this filter ignores it and passes on what the command prints while it stops,
until its output ends (no traceback of its own)."""
import json, os, signal, sys, time

signal.signal(signal.SIGINT, signal.SIG_IGN)
longest, after, last, prev = 0.0, "", time.monotonic(), "(start)"
try:
    for line in sys.stdin:
        now = time.monotonic()
        if now - last > longest:
            longest, after = now - last, prev
        last, prev = now, line.rstrip("\n")[:200]
        sys.stdout.write(line)
        sys.stdout.flush()
except BrokenPipeError:
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # the reader went away (| head): the measurement is still written
with open(sys.argv[1], "w") as f:
    json.dump(dict(seconds=longest, after=after), f, indent=1)

"""ci/bench's kernel log (OUT/kernels.txt, written by bench_kernels in ci/bench-lib.sh): the C peer (bench/peer/peer.c)
and its Java twin (engine/src/jmh/java/k3j/kernels/PeerBench.java) on the same inputs, interleaved per round.

Lines read: "PEER|JAVA <kernel> <threads> min <ms> median <ms> reps <n>", "PEER stream <threads> GB/s <x>",
"PEER fma_peak <threads> GMAC/s double <x> float <y> lanes <n>", "CHECK <kernel> <outputs> differ <n|all>",
and the failure lines ("NOPEER ...", "PEER FAILED ...", "JAVA FAILED ...", PeerBench's "PEER CHECK FAILED ...")."""
import os

# bytes one call reads: the bf16 matrices, and the 16 experts' MXFP4 codes (two per byte) and E8M0 scales (one per 32)
# of PeerInputs (EXPERTS 16, HID 3584, INTER 3072: gate and up INTER x HID, down HID x INTER)
MXFP4_WEIGHTS = 16 * 3 * 3072 * 3584
BYTES = {"bf16": 7168 * 12288 * 2, "lmhead": 7168 * 163840 * 2, "mxfp4": MXFP4_WEIGHTS // 2 + MXFP4_WEIGHTS // 32}
BYTES["mxfp4_int8"] = BYTES["mxfp4"]


class Kernels:
    """best[(side, kernel, threads)] = min ms over the rounds; stream[threads] = max GB/s; fma[threads] = (double, float)
    max G MAC/s; checks[kernel] = the largest count of differing outputs over the rounds (None: 'all'); failures: the
    lines that say a side failed."""

    def __init__(self, path):
        self.best, self.stream, self.fma, self.checks, self.failures = {}, {}, {}, {}, []
        self.present = os.path.exists(path)
        if not self.present:
            self.failures.append(f"{path}: no kernel log (the kernels were not run)")
            return
        for line in open(path):
            f = line.split()
            if not f:
                continue
            try:
                if f[0] in ("PEER", "JAVA") and len(f) >= 5 and f[3] == "min":
                    key = (f[0], f[1], int(f[2]))
                    self.best[key] = min(self.best.get(key, float("inf")), float(f[4]))
                elif f[0] == "PEER" and f[1] == "stream":
                    self.stream[int(f[2])] = max(self.stream.get(int(f[2]), 0.0), float(f[4]))
                elif f[0] == "PEER" and f[1] == "fma_peak":
                    d, fl = self.fma.get(int(f[2]), (0.0, 0.0))
                    self.fma[int(f[2])] = (max(d, float(f[5])), max(fl, float(f[7])))
                elif f[0] == "CHECK":
                    n = int(f[4]) if f[4].isdigit() else None
                    old = self.checks.get(f[1], 0)
                    self.checks[f[1]] = None if n is None or old is None else max(old, n)
                elif f[0] == "NOPEER" or "FAILED" in f:
                    self.failures.append(line.strip())
            except (IndexError, ValueError):
                self.failures.append("unreadable: " + line.strip())

    def ms(self, side, kernel, threads):
        return self.best.get((side, kernel, threads))

    def gbs(self, side, kernel, threads):
        ms = self.ms(side, kernel, threads)
        return BYTES[kernel] / ms / 1e6 if ms else None

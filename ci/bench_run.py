"""One child process of the ci/bench scripts, measured: wall and CPU seconds, peak RSS, exit code, and every output line
with the time it arrived, stdout and stderr read apart (k3j prints its STEP table on stderr and the generated ids
on stdout; read through one pipe, a row is glued to an id: ",162311 16231 1 2.713"). `merge_streams` is only for
ci/bench_run_test.py's mutant."""
import os, subprocess, threading, time


class Run:
    """A child's wall and CPU seconds, peak RSS (MB), exit code and output lines as (epoch seconds, 'out'|'err', text)."""

    def __init__(self, cmd, cwd, log_dir, env=None, name="child", check=True, merge_streams=False):
        self.cmd = cmd
        t0 = time.monotonic()
        self.start = time.time()
        p = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT if merge_streams else subprocess.PIPE)
        self.pid, self.lines = p.pid, []

        def pump(stream, tag):
            for raw in iter(stream.readline, b""):
                self.lines.append((time.time(), tag, raw.decode(errors="replace").rstrip("\n")))

        pumps = [threading.Thread(target=pump, args=(p.stdout, "out"))] + ([] if merge_streams else [threading.Thread(target=pump, args=(p.stderr, "err"))])
        for t in pumps:
            t.start()
        _, status, ru = os.wait4(p.pid, 0)  # on the child itself: communicate() would reap it first and lose its rusage
        p.returncode = self.code = os.waitstatus_to_exitcode(status)
        for t in pumps:
            t.join()
        for stream in (p.stdout, p.stderr):
            if stream:
                stream.close()
        self.wall, self.cpu, self.rss_mb = time.monotonic() - t0, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024
        with open(os.path.join(log_dir, name + ".log"), "w") as f:
            f.write(" ".join(cmd) + "\n" + "\n".join(f"{tag} {text}" for _, tag, text in self.lines) + f"\nexit {self.code}\n")
        if check and self.code != 0:
            raise RuntimeError(f"{os.path.basename(cmd[0])} {' '.join(cmd[1:3])} ... exited {self.code} (see {name}.log): "
                               + " | ".join(t for _, _, t in self.lines[-3:]))

    def text(self, tag=None):
        return "\n".join(t for _, g, t in self.lines if tag is None or g == tag)

    def steps(self, expected):
        """The STEP table, read by its header's columns from whichever stream prints it: [(step, token, seconds, arrival)].
        A table that is missing, out of order or of another length than `expected` is an error."""
        for tag in ("err", "out"):
            rows, cols = [], None
            for t, g, text in self.lines:
                if g != tag:
                    continue
                f = text.split()
                if cols is None:
                    if f[:2] == ["STEP", "TOKEN"] and "SECONDS" in f:
                        cols = f.index("SECONDS")
                    continue
                if f and f[0].isdigit() and len(f) > cols:
                    rows.append((int(f[0]), int(f[1]), float(f[cols]), t))
                elif rows and f and set(f[0]) == {"-"}:
                    break
            if cols is not None:
                if [r[0] for r in rows] != list(range(expected)):
                    raise RuntimeError(f"{os.path.basename(self.cmd[0])}: the STEP table has steps {[r[0] for r in rows]}, expected 0-{expected - 1}")
                return rows
        raise RuntimeError(f"{os.path.basename(self.cmd[0])}: no STEP table in its output")

"""ci/bench_run.py's STEP-table reading against a child that prints like k3j: the ids on stdout as they come, the
STEP rows on stderr. Read apart, every row is found; the mutant (both streams through one pipe, as the old
bench-limits read them) glues rows to ids and must be refused, not read as a shorter table.
usage: python3 ci/bench_run_test.py"""
import os, sys, tempfile, unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_run import Run  # noqa: E402

# like k3j: header and rule on stderr, then per step the id on stdout (no newline) and the row on stderr
CHILD = r'''
printf 'STEP   TOKEN      FED     SECONDS      MS/TOKEN   CACHE HIT  READ       I/O %%    TOK/S\n' >&2
printf -- '-----------\n' >&2
for s in 0 1 2 3; do
  [ $s -gt 0 ] && printf ','
  printf '%d' $((13228 + s))
  sleep 0.05
  printf '%-6d %-10d %-7d %-12.3f 418.03     100.00     1.68 GB    15.1     0.050\n' $s $((13228 + s)) 1 $s.5 >&2
  sleep 0.05
done
printf -- '-----------\n' >&2
printf '\ngenerated ids: 13228,13229,13230,13231\n'
'''


class StepTable(unittest.TestCase):
    def run_child(self, merge):
        with tempfile.TemporaryDirectory() as d:
            return Run(["bash", "-c", CHILD], cwd=d, log_dir=d, name="child", merge_streams=merge)

    def test_streams_apart_give_every_row(self):
        rows = self.run_child(False).steps(4)
        self.assertEqual([(s, tok, sec) for s, tok, sec, _ in rows], [(i, 13228 + i, i + 0.5) for i in range(4)])
        self.assertEqual(sorted(rows, key=lambda r: r[3]), rows)  # arrival times in step order

    def test_a_short_table_is_an_error(self):
        with self.assertRaisesRegex(RuntimeError, "expected 0-4"):
            self.run_child(False).steps(5)

    def test_mutant_one_pipe_glues_rows_and_is_refused(self):
        with self.assertRaisesRegex(RuntimeError, "STEP table has steps"):
            self.run_child(True).steps(4)


if __name__ == "__main__":
    unittest.main()

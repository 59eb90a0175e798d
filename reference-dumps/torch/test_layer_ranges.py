#!/usr/bin/python3
"""A dump made in layer ranges, or resumed after a crash, is the dump made in one run, byte for byte.

  /usr/bin/python3 reference-dumps/torch/test_layer_ranges.py [-v]

On the tiny oracle (13 layers: the dense layer 0, KDA and MLA layers with MoE, AttnRes boundaries at 0, 5 and
10), with every section of a dump (greedy, drift, mutant table, self checks):
- layers 0-6 then 7-12 (the split is inside the AttnRes block 5-9, before an MLA layer) = one run, every file
  compared with cmp; and the one run still regenerates the checked-in reference-dumps/tiny-k3 arrays;
- a run killed (SIGKILL) in the middle of layer 9, after some of its arrays were written and one of them
  truncated, then --resume = one run; a run that dies between writing the carry and renaming it, resumed in
  two steps (--resume --layers 0-11, then --resume), too;
- a carry that lost what crosses a layer boundary makes a different dump: the AttnRes block snapshot, the
  partial sum rounded to float32 (what resuming from the stored partial_out would do), the float32 drift
  run restarted from the float64 state, the incremental greedy logits; so the comparison above can fail;
- a range that does not continue the carry, or a carry made with other settings, is refused (exit 1).
Run by .ci/run (~80 s of CPU).
"""
import filecmp
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(HERE, "dump_checkpoint.py")
MODEL = os.path.join(ROOT, "oracle-fixtures", "tiny-k3")
CHECKED_IN = os.path.join(ROOT, "reference-dumps", "tiny-k3")
ARGS = ["--ids", "250,17,101,3,199,64,128,42,7,230,88,155", "--gen", "20"]
SPLIT = 7  # layers 0-6 | 7-12: inside the AttnRes block that starts at 5; layer 7 is MLA + MoE


def dump(out, *extra, check=True):
    p = subprocess.run([sys.executable, SCRIPT, MODEL, *ARGS, "--out", out, *extra], cwd=ROOT,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and p.returncode != 0:
        raise AssertionError(f"dump {extra} exited {p.returncode}:\n{p.stderr[-3000:]}")
    return p


def crashing(out, hook, *extra):
    """The dump tool with ``hook`` (Python source run before main) installed: it dies where the hook says."""
    code = (f"import os, signal, sys\nsys.path.insert(0, {HERE!r})\nimport dump_checkpoint as d\n{hook}\n"
            f"sys.argv = [{SCRIPT!r}] + {[MODEL, *ARGS, '--out', out, *extra]!r}\nd.main()\n")
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)


def differences(a, b):
    """Files present in one directory only, or whose bytes differ (cmp), recursively."""
    names_a, names_b = set(os.listdir(a)), set(os.listdir(b))
    out = sorted(f"only in {'first' if n in names_a else 'second'}: {n}" for n in names_a ^ names_b)
    for n in sorted(names_a & names_b):
        pa, pb = os.path.join(a, n), os.path.join(b, n)
        if os.path.isdir(pa):
            out += differences(pa, pb)
        elif not filecmp.cmp(pa, pb, shallow=False):
            out.append(f"differs: {n}")
    return out


class LayerRangeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="k3ref-ranges-")
        cls.one = os.path.join(cls.tmp, "one-run")
        dump(cls.one)
        cls.first = os.path.join(cls.tmp, "first-range")
        dump(cls.first, "--layers", f"0-{SPLIT - 1}")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def copy_of_first(self, name):
        d = os.path.join(self.tmp, name)
        shutil.copytree(self.first, d)
        return d

    def test_the_one_run_regenerates_the_checked_in_arrays(self):
        bins = sorted(n for n in os.listdir(CHECKED_IN) if n.endswith(".bin"))
        self.assertEqual(bins, sorted(n for n in os.listdir(self.one) if n.endswith(".bin")))
        for n in bins:
            self.assertTrue(filecmp.cmp(os.path.join(CHECKED_IN, n), os.path.join(self.one, n), shallow=False), n)

    def test_two_ranges_equal_one_run_byte_for_byte(self):
        self.assertFalse(os.path.exists(os.path.join(self.first, "manifest.json")), "a partial dump has no manifest")
        self.assertTrue(os.path.isfile(os.path.join(self.first, "resume", "carry.pt")))
        d = self.copy_of_first("two-ranges")
        p = dump(d, "--layers", f"{SPLIT}-12")
        self.assertIn(f"float64 reference, layers {SPLIT}-12", p.stderr, "the progress bar covers the range")
        self.assertIn("ETA", p.stderr)
        self.assertEqual([], differences(self.one, d))
        self.assertGreater(len(os.listdir(d)), 200)

    def test_resume_after_a_kill_in_the_middle_of_a_layer(self):
        d = os.path.join(self.tmp, "killed")
        hook = ("put = d.Writer.put\n"
                "def killing(self, key, t):\n"
                "    put(self, key, t)\n"
                "    if key == 'layers.9.attn_out':\n"
                "        os.kill(os.getpid(), signal.SIGKILL)\n"
                "d.Writer.put = killing")
        p = crashing(d, hook)
        self.assertEqual(-9, p.returncode, p.stderr[-2000:])
        carry = torch.load(os.path.join(d, "resume", "carry.pt"))
        self.assertEqual(9, carry["next_layer"], "layers 0-8 were completed")
        self.assertTrue(os.path.isfile(os.path.join(d, "layers.9.attn_in.bin")), "layer 9 was half written")
        self.assertFalse(os.path.exists(os.path.join(d, "layers.9.mlp_out.bin")))
        self.assertFalse(os.path.exists(os.path.join(d, "manifest.json")))
        with open(os.path.join(d, "layers.9.attn_in.bin"), "r+b") as f:  # a torn write: the layer must be redone
            f.truncate(12)
        p = dump(d, "--resume")
        self.assertIn("float64 reference, layers 9-12", p.stderr)
        self.assertEqual([], differences(self.one, d))

    def test_resume_after_dying_while_the_carry_is_written(self):
        d = os.path.join(self.tmp, "died-in-save")
        hook = ("import torch\nsave = torch.save\nn = [0]\n"
                "def dying(obj, path, *a, **k):\n"
                "    save(obj, path, *a, **k)\n"
                "    if obj.get('next_layer') == 4:\n"
                "        raise RuntimeError('simulated crash after the carry of layer 3 was written, before its rename')\n"
                "d.torch.save = dying")
        p = crashing(d, hook, "--layers", "0-11")
        self.assertNotEqual(0, p.returncode)
        self.assertIn("simulated crash", p.stderr)
        self.assertEqual(3, torch.load(os.path.join(d, "resume", "carry.pt"))["next_layer"])
        self.assertTrue(os.path.isfile(os.path.join(d, "resume", "carry.pt.tmp")))
        dump(d, "--resume", "--layers", "0-11")
        self.assertFalse(os.path.exists(os.path.join(d, "manifest.json")), "--resume stops at B of --layers")
        dump(d, "--resume")  # every layer but the last: then the manifest
        self.assertEqual([], differences(self.one, d))

    def assert_a_damaged_carry_changes_the_dump(self, name, damage):
        d = self.copy_of_first(name)
        path = os.path.join(d, "resume", "carry.pt")
        carry = torch.load(path)
        damage(carry)
        torch.save(carry, path)
        dump(d, "--layers", f"{SPLIT}-12")
        diff = differences(self.one, d)
        self.assertNotEqual([], diff, f"{name}: the dump did not change, so the comparison could not catch it")
        return diff

    def test_the_block_snapshot_must_be_carried(self):
        diff = self.assert_a_damaged_carry_changes_the_dump(
            "no-block-snapshot", lambda c: c["lanes"]["main"]["snaps"].pop())  # the snapshot taken at layer 5
        self.assertIn(f"differs: layers.{SPLIT}.attn_in.bin", diff)

    def test_the_partial_sum_must_be_carried_in_float64(self):
        def to_f32(c):
            lane = c["lanes"]["main"]
            lane["h"] = lane["h"].to(torch.float32).to(torch.float64)  # = resuming from layers.6.partial_out.bin
        diff = self.assert_a_damaged_carry_changes_the_dump("partial-in-float32", to_f32)
        self.assertIn(f"differs: layers.{SPLIT}.attn_out.bin", diff)

    def test_the_float32_drift_run_must_be_carried(self):
        def restart(c):  # a carry of the float64 state alone: the float32 run restarts from it
            main, lane = c["lanes"]["main"], c["lanes"]["f32"]
            lane["h"], lane["snaps"] = main["h"].to(torch.float32), [s.to(torch.float32) for s in main["snaps"]]
        diff = self.assert_a_damaged_carry_changes_the_dump("drift-lane-restarted", restart)
        self.assertEqual(["differs: manifest.json"], diff, "only the tolerances move")

    def test_the_incremental_greedy_logits_must_be_carried(self):
        def drop(c):
            c["step_rows"][-1] = c["step_rows"][-1] * (1 + 2.0 ** -40)
        self.assertEqual(["differs: manifest.json"],
                         self.assert_a_damaged_carry_changes_the_dump("greedy-rows", drop))

    def test_a_range_that_does_not_continue_the_carry_is_refused(self):
        d = self.copy_of_first("gap")
        p = dump(d, "--layers", f"{SPLIT + 1}-12", check=False)
        self.assertEqual(1, p.returncode)
        self.assertIn(f"continues at layer {SPLIT}", p.stderr)
        p = dump(d, "--layers", f"{SPLIT}-12", "--safety", "5", check=False)
        self.assertEqual(1, p.returncode)
        self.assertIn("other settings (safety", p.stderr)
        p = dump(os.path.join(self.tmp, "nothing-here"), "--resume", check=False)
        self.assertEqual(1, p.returncode)
        self.assertIn("no unfinished dump", p.stderr)


if __name__ == "__main__":
    unittest.main()

#!/usr/bin/python3
"""Self checks of the k3ref reference and of the tiny oracle + its dump.

  /usr/bin/python3 reference-dumps/torch/test_reference.py [-v]

Op-level: MXFP4 nibble order / E8M0 / quantiser round trip, BF16 widening, conv and KDA streaming
(= one shot), router tie order, MLA causality. Model-level on oracle-fixtures/tiny-k3: causality
(prefix run = full run), incremental decode = full recompute, chunked prefill = one shot,
checkpoint regenerates byte for byte, the dump matches a fresh run, and every mutant moves the
logits by >= 10x the logit tolerance (or cannot bind).
"""
import hashlib
import json
import os
import shutil
import struct
import sys
import tempfile
import unittest

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TINY = os.path.join(ROOT, "oracle-fixtures", "tiny-k3")
DUMP = os.path.join(ROOT, "reference-dumps", "tiny-k3")
sys.path.insert(0, HERE)
sys.path.insert(0, TINY)

from dump_checkpoint import state_arrays  # noqa: E402
from k3ref import ops  # noqa: E402
from k3ref.model import Config, Model, greedy  # noqa: E402
from k3ref.safetensors_io import decode, index_file, read_raw, write_file, to_bf16_bytes  # noqa: E402

_MODEL = {}


def model(dtype=torch.float64):
    if dtype not in _MODEL:
        _MODEL[dtype] = Model(TINY, dtype)
    return _MODEL[dtype]


def manifest():
    with open(os.path.join(DUMP, "manifest.json")) as f:
        return json.load(f)


def load_array(m, key):
    a = m["arrays"][key]
    with open(os.path.join(DUMP, a["file"]), "rb") as f:
        b = f.read()
    dt = {"F32": "<f4", "I32": "<i4"}[a["dtype"]]
    return torch.from_numpy(np.frombuffer(b, dtype=dt).copy()).reshape(a["shape"])


class OpsTest(unittest.TestCase):
    def test_mxfp4_low_nibble_is_even_element(self):
        packed = torch.tensor([[0x2F]], dtype=torch.uint8)  # low 0xF = -6, high 0x2 = 1.0
        scales = torch.tensor([[127]], dtype=torch.uint8)
        packed = torch.cat([packed, torch.zeros(1, 15, dtype=torch.uint8)], 1)
        w = ops.mxfp4_dequant(packed, scales)
        self.assertEqual(w[0, 0].item(), -6.0)
        self.assertEqual(w[0, 1].item(), 1.0)
        ws = ops.mxfp4_dequant(packed, scales, mut={"nibbles_swapped"})
        self.assertEqual((ws[0, 0].item(), ws[0, 1].item()), (1.0, -6.0))

    def test_e8m0_bias_and_255(self):
        packed = torch.full((1, 16), 0x22, dtype=torch.uint8)  # all 1.0
        self.assertEqual(ops.mxfp4_dequant(packed, torch.tensor([[130]], dtype=torch.uint8))[0, 0].item(), 8.0)
        self.assertEqual(ops.mxfp4_dequant(packed, torch.tensor([[0]], dtype=torch.uint8))[0, 0].item(), 2.0 ** -127)
        z = ops.mxfp4_dequant(packed, torch.tensor([[255]], dtype=torch.uint8))
        self.assertTrue(bool((z == 0).all()))
        n = ops.mxfp4_dequant(packed, torch.tensor([[255]], dtype=torch.uint8), e8m0_255="nan")
        self.assertTrue(bool(torch.isnan(n).all()))

    def test_quantiser_round_trip_is_exact_on_representable_values(self):
        g = torch.Generator().manual_seed(1)
        codes = torch.randint(0, 16, (8, 64), generator=g)
        lut = torch.tensor(ops.E2M1, dtype=torch.float64)
        w = lut[codes] * 2.0 ** -5
        w[:, :32] *= 4.0  # two groups with different scales (max code 6 in each group below)
        w[:, 0] = 6.0 * 2.0 ** -3
        w[:, 32] = -6.0 * 2.0 ** -5
        p, s = ops.mxfp4_quantize(w)
        self.assertTrue(torch.equal(ops.mxfp4_dequant(p, s), w))

    def test_bf16_widening_is_exact(self):
        vals = torch.tensor([1.0, -2.5, 3.140625, 1e-30, 65504.0], dtype=torch.float32)
        b = to_bf16_bytes(vals)
        d = tempfile.mkdtemp()
        try:
            path = os.path.join(d, "x.safetensors")
            write_file(path, [("t", "BF16", [5], b)])
            info = index_file(path)["t"]
            got = decode(info, read_raw(info))
            bits = np.frombuffer(b, dtype="<u2").astype(np.uint32) << 16
            self.assertTrue(torch.equal(got, torch.from_numpy(bits.view(np.float32).copy()).double()))
            self.assertEqual(got.dtype, torch.float64)
        finally:
            shutil.rmtree(d)

    def test_short_conv_streams_and_taps_oldest_first(self):
        g = torch.Generator().manual_seed(2)
        x = torch.randn(9, 5, generator=g, dtype=torch.float64)
        w = torch.randn(5, 4, generator=g, dtype=torch.float64)
        y, st = ops.short_conv(x, w)
        y1, s1 = ops.short_conv(x[:4], w)
        y2, s2 = ops.short_conv(x[4:], w, s1)
        self.assertTrue(torch.allclose(torch.cat([y1, y2]), y, atol=1e-14))
        self.assertTrue(torch.equal(s2, st))
        acc = w[:, 3] * x[0]  # first token: only the last tap sees a real input
        self.assertTrue(torch.allclose(y[0], acc * torch.sigmoid(acc), atol=1e-15))

    def test_kda_recurrence_streams(self):
        g = torch.Generator().manual_seed(3)
        T, H, D = 7, 2, 5
        q = ops.l2norm(torch.randn(T, H, D, generator=g, dtype=torch.float64))
        k = ops.l2norm(torch.randn(T, H, D, generator=g, dtype=torch.float64))
        v = torch.randn(T, H, D, generator=g, dtype=torch.float64)
        gg = -torch.rand(T, H, D, generator=g, dtype=torch.float64)
        beta = torch.rand(T, H, generator=g, dtype=torch.float64)
        o, S = ops.kda_recurrence(q, k, v, gg, beta)
        o1, S1 = ops.kda_recurrence(q[:3], k[:3], v[:3], gg[:3], beta[:3])
        o2, S2 = ops.kda_recurrence(q[3:], k[3:], v[3:], gg[3:], beta[3:], S1)
        self.assertTrue(torch.allclose(torch.cat([o1, o2]), o, atol=1e-14))
        self.assertTrue(torch.allclose(S2, S, atol=1e-14))

    def test_router_ties_go_to_lower_id_and_bias_only_selects(self):
        x = torch.zeros(1, 4, dtype=torch.float64)
        gate = torch.zeros(6, 4, dtype=torch.float64)  # every score sigmoid(0) = 0.5
        bias = torch.tensor([0.0, 0.1, 0.0, 0.1, 0.0, 0.0], dtype=torch.float64)
        idx, w = ops.router(x, gate, bias, 3, True, 2.0)
        self.assertEqual(idx[0].tolist(), [1, 3, 0])
        self.assertTrue(torch.allclose(w, torch.full((1, 3), 2.0 / 3, dtype=torch.float64)))

    def test_every_mutant_name_is_known(self):
        with self.assertRaises(ValueError):
            ops.l2norm(torch.ones(3), mut={"no_such_mutant"})


class ModelTest(unittest.TestCase):
    def setUp(self):
        self.cfg = Config.load(os.path.join(TINY, "config.json"))
        self.m = manifest()
        self.ids = self.m["ids"]

    def test_layer_map_is_one_based(self):
        self.assertEqual(self.cfg.layer_map(), "KKKMKKKMKKKMM")
        self.assertEqual(self.m["layer_map"], "KKKMKKKMKKKMM")
        self.assertEqual(self.m["boundaries"], [0, 5, 10])

    def test_causality_prefix_equals_full(self):
        full = model().forward(self.ids)
        for n in (1, 5, 12, 20):
            self.assertLess(float((model().forward(self.ids[:n]) - full[:n]).abs().max()), 1e-10, f"prefix {n}")

    def test_incremental_decode_equals_full_recompute(self):
        p = self.m["prompt_ids"]
        gi, rows_i = greedy(model(), p, len(self.m["generated_ids"]), incremental=True)
        gf, rows_f = greedy(model(), p, len(self.m["generated_ids"]), incremental=False)
        self.assertEqual(gi, gf)
        self.assertEqual(gi, self.m["generated_ids"])
        self.assertLess(float((torch.stack(rows_i) - torch.stack(rows_f)).abs().max()), 1e-10)

    def test_chunked_prefill_equals_one_shot(self):
        st = model().new_state()
        a = model().forward(self.ids[:5], st)
        b = model().forward(self.ids[5:19], st)
        c = model().forward(self.ids[19:], st)
        full = model().forward(self.ids)
        self.assertLess(float((torch.cat([a, b, c]) - full).abs().max()), 1e-10)

    def test_streaming_reads_equal_resident_weights(self):
        st = Model(TINY, torch.float64, cache_weights=False)
        self.assertTrue(torch.equal(st.forward(self.ids[:6]), model().forward(self.ids[:6])))

    def test_checkpoint_regenerates_byte_for_byte(self):
        import make_tiny
        d = tempfile.mkdtemp()
        try:
            shutil.copy(os.path.join(TINY, "config.json"), d)
            make_tiny.write(d, self.cfg, make_tiny.SEED)
            for n in sorted(os.listdir(d)):
                with open(os.path.join(d, n), "rb") as f1, open(os.path.join(TINY, n), "rb") as f2:
                    self.assertEqual(hashlib.sha256(f1.read()).hexdigest(), hashlib.sha256(f2.read()).hexdigest(), n)
        finally:
            shutil.rmtree(d)

    def test_checkpoint_layout_is_the_released_one(self):
        shards = sorted(n for n in os.listdir(TINY) if n.endswith(".safetensors"))
        self.assertGreaterEqual(len(shards), 2)
        with open(os.path.join(TINY, "model.safetensors.index.json")) as f:
            wm = json.load(f)["weight_map"]
        idx = {}
        for s in shards:
            for n, info in index_file(os.path.join(TINY, s)).items():
                idx[n] = info
                self.assertEqual(wm[n], s)
        self.assertEqual(set(wm), set(idx))
        alog = idx["language_model.model.layers.0.self_attn.A_log"]
        self.assertEqual((alog.dtype, alog.shape), ("F32", [self.cfg.kda_head_dim]))
        a = decode(alog, read_raw(alog))
        self.assertTrue(bool((a[self.cfg.kda_heads:] == 0).all()))
        self.assertEqual(len(set(a[:self.cfg.kda_heads].tolist())), self.cfg.kda_heads)
        self.assertEqual(idx["language_model.model.layers.1.block_sparse_moe.gate.e_score_correction_bias"].dtype, "F32")
        self.assertEqual(idx["language_model.model.layers.0.self_attn.dt_bias"].dtype, "F32")
        self.assertEqual(idx["language_model.model.norm.weight"].dtype, "BF16")
        self.assertIn("language_model.lm_head.weight", idx)
        scale_bytes = []
        for layer in range(1, self.cfg.n_layers):
            for e in range(self.cfg.n_experts):
                p = f"language_model.model.layers.{layer}.block_sparse_moe.experts.{e}."
                six = [idx[p + w + "." + k] for w in ("w1", "w2", "w3") for k in ("weight_packed", "weight_scale")]
                self.assertTrue(all(t.dtype == "U8" and t.path == six[0].path for t in six))
                lo, hi = min(t.offset for t in six), max(t.offset + t.nbytes for t in six)
                self.assertEqual(hi - lo, sum(t.nbytes for t in six), "expert tensors contiguous")
                for t in six[1::2]:
                    scale_bytes += list(read_raw(t))
        self.assertNotIn(255, scale_bytes)
        self.assertGreater(len(set(scale_bytes)), 8)

    def test_dump_matches_a_fresh_run(self):
        rec = {}
        logits = model().forward(self.ids, record=rec)
        m = self.m
        for key, a in m["arrays"].items():
            with open(os.path.join(DUMP, a["file"]), "rb") as f:
                self.assertEqual(hashlib.sha256(f.read()).hexdigest(), a["sha256"], key)
        self.assertLess(float((load_array(m, "logits").double() - logits).abs().max()), 1e-5)
        for i in range(self.cfg.n_layers):
            for s in ("partial_in", "attn_out", "mlp_in", "mlp_out", "partial_out"):
                got = load_array(m, f"layers.{i}.{s}").double()
                self.assertLess(float((got - rec[f"layers.{i}.{s}"]).abs().max()), 1e-5, f"layer {i} {s}")
            if self.cfg.is_moe(i):
                self.assertTrue(torch.equal(load_array(m, f"layers.{i}.moe_idx").long(), rec[f"layers.{i}.moe_idx"]))
        self.assertEqual(load_array(m, "greedy_ids").tolist(), m["generated_ids"])

    def test_single_layer_from_dump_inputs_is_within_atol_layer(self):
        m = self.m
        snaps = load_array(m, "snapshots").double()
        for i in (0, 3, 5, 12):
            r = {}
            info = m["layers"][i]
            _, _, st = model(torch.float32).run_layer(i, load_array(m, f"layers.{i}.partial_in"),
                                                      [s.float() for s in snaps[:info["snapshots_attn"]]], None, r)
            r.update({f"layers.{i}.{k}": v for k, v in state_arrays(st).items()})
            for s, t in m["tolerances"]["layers"][i]["stages"].items():
                d = float((r[f"layers.{i}.{s}"].double() - load_array(m, f"layers.{i}.{s}").double()).abs().max())
                self.assertLessEqual(d, t["atol_layer"], f"layer {i} {s}")

    def test_margins_and_gaps_are_far_above_drift(self):
        r = self.m["robustness"]
        self.assertGreater(r["margin_over_logit_drift"], 100)
        self.assertGreater(r["routing_gap_over_choice_drift"], 30)
        self.assertEqual(self.m["tolerances"]["routing_flips_e2e_layers"], 0)
        for k, v in self.m["self_checks"].items():
            self.assertTrue(v is True or (not isinstance(v, bool) and v < 1e-10), k)

    def test_every_mutant_is_visible(self):
        m = self.m
        atol = m["tolerances"]["logits"]["atol"]
        rows = {r["name"]: r for r in m["mutants"]}
        self.assertEqual(set(rows), set(ops.MUTANTS))
        logits = model().forward(self.ids)
        for name in ops.MUTANTS:
            with self.subTest(mutant=name):
                try:
                    lm = Model(TINY, torch.float64, mut={name}).forward(self.ids)
                except KeyError:
                    self.assertEqual(rows[name]["visible_as"], "bind error")
                    continue
                d = float((lm - logits).abs().max())
                self.assertGreaterEqual(d, 10 * atol, name)
                self.assertAlmostEqual(d, rows[name]["max_abs_dlogit"], delta=1e-6 * max(1.0, d))


if __name__ == "__main__":
    unittest.main(verbosity=2 if "-v" in sys.argv else 1, argv=[a for a in sys.argv if a != "-v"])

#!/usr/bin/python3
"""Self checks of the k3ref reference and of the oracles (tiny-k3, mini-k3-93) + their dumps.

  /usr/bin/python3 reference-dumps/torch/test_reference.py [-v] [TinyTest|MiniTest|OpsTest]

Op-level: MXFP4 nibble order / E8M0 / quantiser round trip, BF16 widening, conv and KDA streaming
(= one shot), router tie order, MLA causality. Model-level, on each oracle: causality (prefix run =
full run), incremental decode = full recompute, chunked prefill = one shot, streamed reads =
resident weights, checkpoint regenerates byte for byte, released layout (dtypes, padded A_log,
contiguous experts), the dump matches a fresh run, single layers within atol_layer, margins and
routing gaps far above the float32 drift, and every mutant moves the logits by >= 10x the logit
tolerance (or cannot bind). mini-k3-93 adds: the real 93-layer map, AttnRes boundaries, one
contiguous trunk run per layer with the experts elsewhere, distinct dimensions, the budget section, and
the expert sweep (complete, the stored sketches recompute from the stored probes, resumable byte for byte,
the chi-square miss probability).
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
sys.path.insert(0, HERE)

from dump_checkpoint import state_arrays  # noqa: E402
from k3ref import ops  # noqa: E402
from k3ref.model import LM_HEAD, PREFIX, Config, Model, greedy  # noqa: E402
from k3ref.safetensors_io import (decode, header_sha256, index_file, read_header, read_raw, sha256_file,  # noqa: E402
                                  to_bf16_bytes, write_file)

_MODEL = {}


def fixture_dir(name):
    return os.path.join(ROOT, "oracle-fixtures", name)


def dump_dir(name):
    return os.path.join(ROOT, "reference-dumps", name)


def model(name, dtype=torch.float64):
    if (name, dtype) not in _MODEL:
        _MODEL[name, dtype] = Model(fixture_dir(name), dtype)
    return _MODEL[name, dtype]


def manifest(name):
    with open(os.path.join(dump_dir(name), "manifest.json")) as f:
        return json.load(f)


def load_array(name, m, key):
    a = m["arrays"][key]
    with open(os.path.join(dump_dir(name), a["file"]), "rb") as f:
        b = f.read()
    dt = {"F32": "<f4", "I32": "<i4"}[a["dtype"]]
    return torch.from_numpy(np.frombuffer(b, dtype=dt).copy()).reshape(a["shape"])


def generator(name, script):
    """The fixture's generator module (make_tiny / make_mini), imported from its folder."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(script, os.path.join(fixture_dir(name), script + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def shard_index(d):
    shards = sorted(n for n in os.listdir(d) if n.endswith(".safetensors"))
    idx = {}
    for sh in shards:
        idx.update(index_file(os.path.join(d, sh)))
    return shards, idx


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

    def test_table_dequantisation_equals_the_reference_op(self):
        from k3ref.experts import dequant
        g = torch.Generator().manual_seed(3)
        packed = torch.randint(0, 256, (6, 32), dtype=torch.uint8, generator=g)
        scales = torch.randint(0, 256, (6, 2), dtype=torch.uint8, generator=g)
        scales[0, 0], scales[1, 1] = 255, 0
        for mode in ("zero", "nan"):
            a, b = dequant(packed, scales, 32, mode).to(torch.float64), ops.mxfp4_dequant(packed, scales, 32, mode)
            self.assertTrue(bool(((a == b) | (a.isnan() & b.isnan())).all()), mode)

    def test_every_mutant_name_is_known(self):
        with self.assertRaises(ValueError):
            ops.l2norm(torch.ones(3), mut={"no_such_mutant"})


class OracleChecks:
    """Checks every oracle must pass; a subclass sets NAME, SCRIPT, LAYER_MAP, PREFIXES, CUTS, LAYERS."""
    NAME = SCRIPT = LAYER_MAP = None
    PREFIXES = CUTS = LAYERS = ()

    def setUp(self):
        self.dir = fixture_dir(self.NAME)
        self.cfg = Config.load(os.path.join(self.dir, "config.json"))
        self.m = manifest(self.NAME)
        self.ids = self.m["ids"]

    def model(self, dtype=torch.float64):
        return model(self.NAME, dtype)

    def array(self, key):
        return load_array(self.NAME, self.m, key)

    def test_layer_map_is_one_based(self):
        self.assertEqual(self.cfg.layer_map(), self.LAYER_MAP)
        self.assertEqual(self.m["layer_map"], self.LAYER_MAP)
        self.assertEqual(self.m["boundaries"], list(range(0, self.cfg.n_layers, self.cfg.attn_res_block)))

    def test_causality_prefix_equals_full(self):
        full = self.model().forward(self.ids)
        for n in self.PREFIXES:
            self.assertLess(float((self.model().forward(self.ids[:n]) - full[:n]).abs().max()), 1e-10, f"prefix {n}")

    def test_incremental_decode_equals_full_recompute(self):
        p = self.m["prompt_ids"]
        gi, rows_i = greedy(self.model(), p, len(self.m["generated_ids"]), incremental=True)
        gf, rows_f = greedy(self.model(), p, len(self.m["generated_ids"]), incremental=False)
        self.assertEqual(gi, gf)
        self.assertEqual(gi, self.m["generated_ids"])
        self.assertLess(float((torch.stack(rows_i) - torch.stack(rows_f)).abs().max()), 1e-10)

    def test_chunked_prefill_equals_one_shot(self):
        st = self.model().new_state()
        bounds = [0] + list(self.CUTS) + [len(self.ids)]
        parts = [self.model().forward(self.ids[a:b], st) for a, b in zip(bounds, bounds[1:])]
        full = self.model().forward(self.ids)
        self.assertLess(float((torch.cat(parts) - full).abs().max()), 1e-10)

    def test_streaming_reads_equal_resident_weights(self):
        st = Model(self.dir, torch.float64, cache_weights=False)
        self.assertTrue(torch.equal(st.forward(self.ids[:6]), self.model().forward(self.ids[:6])))

    def test_checkpoint_regenerates_byte_for_byte(self):
        gen = generator(self.NAME, self.SCRIPT)
        d = tempfile.mkdtemp()
        try:
            shutil.copy(os.path.join(self.dir, "config.json"), d)
            gen.write(d, self.cfg, gen.SEED)
            for n in sorted(os.listdir(d)):
                with open(os.path.join(d, n), "rb") as f1, open(os.path.join(self.dir, n), "rb") as f2:
                    self.assertEqual(hashlib.sha256(f1.read()).hexdigest(), hashlib.sha256(f2.read()).hexdigest(), n)
        finally:
            shutil.rmtree(d)

    def test_checkpoint_layout_is_the_released_one(self):
        shards, idx = shard_index(self.dir)
        self.assertGreaterEqual(len(shards), 2)
        with open(os.path.join(self.dir, "model.safetensors.index.json")) as f:
            wm = json.load(f)["weight_map"]
        for n, info in idx.items():
            self.assertEqual(wm[n], os.path.basename(info.path))
        self.assertEqual(set(wm), set(idx))
        kda = self.cfg.layer_map().index("K")
        alog = idx[f"{PREFIX}layers.{kda}.self_attn.A_log"]
        self.assertEqual((alog.dtype, alog.shape), ("F32", [self.cfg.kda_head_dim]))
        a = decode(alog, read_raw(alog))
        self.assertTrue(bool((a[self.cfg.kda_heads:] == 0).all()))
        self.assertEqual(len(set(a[:self.cfg.kda_heads].tolist())), self.cfg.kda_heads)
        self.assertEqual(idx[f"{PREFIX}layers.1.block_sparse_moe.gate.e_score_correction_bias"].dtype, "F32")
        self.assertEqual(idx[f"{PREFIX}layers.{kda}.self_attn.dt_bias"].dtype, "F32")
        self.assertEqual(idx[PREFIX + "norm.weight"].dtype, "BF16")
        self.assertIn(LM_HEAD, idx)
        scale_bytes = []
        for layer in range(self.cfg.first_dense, self.cfg.n_layers):
            for e in range(self.cfg.n_experts):
                p = f"{PREFIX}layers.{layer}.block_sparse_moe.experts.{e}."
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
        logits = self.model().forward(self.ids, record=rec)
        m = self.m
        for key, a in m["arrays"].items():
            with open(os.path.join(dump_dir(self.NAME), a["file"]), "rb") as f:
                self.assertEqual(hashlib.sha256(f.read()).hexdigest(), a["sha256"], key)
        self.assertLess(float((self.array("logits").double() - logits).abs().max()), 1e-5)
        for i in range(self.cfg.n_layers):
            for s in ("partial_in", "attn_out", "mlp_in", "mlp_out", "partial_out"):
                got = self.array(f"layers.{i}.{s}").double()
                self.assertLess(float((got - rec[f"layers.{i}.{s}"]).abs().max()), 1e-5, f"layer {i} {s}")
            if self.cfg.is_moe(i):
                self.assertTrue(torch.equal(self.array(f"layers.{i}.moe_idx").long(), rec[f"layers.{i}.moe_idx"]))
        self.assertEqual(self.array("greedy_ids").tolist(), m["generated_ids"])

    def test_dump_names_the_checkpoint_by_header_hash(self):
        files = {f["name"]: f for f in self.m["checkpoint"]["files"]}
        for sh in sorted(n for n in os.listdir(self.dir) if n.endswith(".safetensors")):
            e = files[sh]
            path = os.path.join(self.dir, sh)
            self.assertEqual(e["size"], os.path.getsize(path))
            self.assertEqual(e["header_bytes"], read_header(path)[2])
            self.assertEqual(e["header_sha256"], header_sha256(path))
            self.assertEqual(e["sha256"], sha256_file(path))

    def test_single_layer_from_dump_inputs_is_within_atol_layer(self):
        m = self.m
        snaps = self.array("snapshots").double()
        for i in self.LAYERS:
            r = {}
            info = m["layers"][i]
            _, _, st = self.model(torch.float32).run_layer(i, self.array(f"layers.{i}.partial_in"),
                                                           [s.float() for s in snaps[:info["snapshots_attn"]]], None, r)
            r.update({f"layers.{i}.{k}": v for k, v in state_arrays(st).items()})
            for s, t in m["tolerances"]["layers"][i]["stages"].items():
                d = float((r[f"layers.{i}.{s}"].double() - self.array(f"layers.{i}.{s}").double()).abs().max())
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
        logits = self.model().forward(self.ids)
        for name in ops.MUTANTS:
            with self.subTest(mutant=name):
                try:
                    lm = Model(self.dir, torch.float64, mut={name}).forward(self.ids)
                except KeyError:
                    self.assertEqual(rows[name]["visible_as"], "bind error")
                    continue
                d = float((lm - logits).abs().max())
                self.assertGreaterEqual(d, 10 * atol, name)
                self.assertAlmostEqual(d, rows[name]["max_abs_dlogit"], delta=1e-6 * max(1.0, d))


class TinyTest(OracleChecks, unittest.TestCase):
    NAME, SCRIPT, LAYER_MAP = "tiny-k3", "make_tiny", "KKKMKKKMKKKMM"
    PREFIXES, CUTS, LAYERS = (1, 5, 12, 20), (5, 19), (0, 3, 5, 12)


class MiniTest(OracleChecks, unittest.TestCase):
    NAME, SCRIPT, LAYER_MAP = "mini-k3-93", "make_mini", "KKKM" * 23 + "M"
    PREFIXES, CUTS, LAYERS = (1, 8, 13), (3, 11), (0, 1, 3, 12, 84, 91, 92)

    def test_real_layer_map_and_attnres_geometry(self):
        c = self.cfg
        self.assertEqual(c.n_layers, 93)
        self.assertEqual([i for i in range(93) if c.is_mla(i)], list(range(3, 92, 4)) + [92])
        self.assertEqual((c.first_dense, c.attn_res_block), (1, 12))
        self.assertEqual(self.m["boundaries"], [0, 12, 24, 36, 48, 60, 72, 84])
        self.assertEqual(self.m["arrays"]["snapshots"]["shape"][0], 8)  # final mix: 8 snapshots + partial
        self.assertEqual([(l["snapshots_attn"], l["snapshots_mlp"]) for l in self.m["layers"] if l["index"] in (0, 12, 92)],
                         [(0, 1), (1, 2), (8, 8)])

    def test_dimensions_are_distinct_and_routing_is_not_trivial(self):
        c = self.cfg
        dims = {"hidden": c.hidden, "vocab": c.vocab, "kda_heads": c.kda_heads, "kda_head_dim": c.kda_head_dim,
                "kda_width": c.kda_heads * c.kda_head_dim, "mla_heads": c.n_heads, "q_lora": c.q_lora,
                "kv_lora": c.kv_lora, "qk_nope": c.qk_nope, "qk_rope": c.qk_rope, "v_head": c.v_head,
                "experts": c.n_experts, "top_k": c.topk, "shared": c.n_shared, "latent": c.latent,
                "moe_inter": c.moe_inter, "shared_inter": c.moe_inter * c.n_shared, "dense_inter": c.dense_inter,
                "conv": c.conv_k, "attn_res_block": c.attn_res_block}
        self.assertEqual(len(set(dims.values())), len(dims), dims)
        self.assertGreater(c.topk, 1)
        self.assertNotEqual(c.routed_scale, 1.0)
        self.assertGreater(self.m["robustness"]["routing_order_gap_over_choice_drift"], 30)

    def test_each_layer_trunk_is_one_contiguous_run_and_experts_lie_elsewhere(self):
        shards, idx = shard_index(self.dir)
        self.assertGreaterEqual(len(shards), 6)
        runs = {}
        for n, info in idx.items():
            if ".layers." in n and ".experts." not in n:
                runs.setdefault(int(n.split(".layers.")[1].split(".")[0]), []).append(info)
        experts_of = {}
        for n, info in idx.items():
            if ".experts." in n:
                experts_of.setdefault(info.path, []).append(info)
        self.assertEqual(sorted(runs), list(range(self.cfg.n_layers)))
        for i, ts in runs.items():
            self.assertEqual(len({t.path for t in ts}), 1, f"layer {i} trunk spans shards")
            lo, hi = min(t.offset for t in ts), max(t.offset + t.nbytes for t in ts)
            self.assertEqual(hi - lo, sum(t.nbytes for t in ts), f"layer {i} trunk is not one run")
            for e in experts_of.get(ts[0].path, []):
                self.assertFalse(lo < e.offset + e.nbytes and e.offset < hi, f"{e.name} inside layer {i}'s run")
        split = [i for i in range(1, self.cfg.n_layers) if len({idx[f"{PREFIX}layers.{i}.block_sparse_moe.experts.{e}.w1.weight_packed"].path
                                                                 for e in range(self.cfg.n_experts)}) > 1]
        self.assertGreater(len(split), 0, "some layer's experts span two shards, as in the release")

    def test_manifest_records_the_budget_rule(self):
        b = self.m["budget"]
        self.assertEqual((b["eps32"], b["factor"]), (1.2e-7, 50.0))
        for s, v in b["stages"].items():
            self.assertAlmostEqual(v["budget"], 1.2e-7 * v["width"] ** 0.5 * 50, delta=1e-15, msg=s)
            self.assertLess(v["fp32_share_of_budget_layer"], 1.0, s)

    def test_expert_sweep_is_complete_recomputes_and_resumes(self):
        from k3ref import experts as sweep
        e = self.m["experts"]
        c = self.cfg
        self.assertTrue(e["complete"])
        self.assertEqual([l["index"] for l in e["layers"]], list(range(c.first_dense, c.n_layers)))
        self.assertEqual(e["floats_per_expert"], e["probes"] * 4 * (e["sketch_k"] + 1))
        for p, v in e["fp32_share_of_budget"].items():
            self.assertLess(v, 0.1, f"float32 uses {v} of the {p} budget")
        # the stored sketches are the float64 parts of the stored probes, for a routed and an unrouted expert
        s_lt = load_array(self.NAME, self.m, "experts.proj_latent").to(torch.float64)
        s_in = load_array(self.NAME, self.m, "experts.proj_inter").to(torch.float64)
        for i in (1, 50, 92):
            z = load_array(self.NAME, self.m, f"experts.{i}.probes")
            v = load_array(self.NAME, self.m, f"experts.{i}.probes_inter")
            sk = load_array(self.NAME, self.m, f"experts.{i}.sketch").to(torch.float64)
            nm = load_array(self.NAME, self.m, f"experts.{i}.norm").to(torch.float64)
            routed = set(load_array(self.NAME, self.m, f"layers.{i}.moe_idx").flatten().tolist())
            for ex in (min(routed), min(set(range(c.n_experts)) - routed)):
                parts = sweep.expert_parts(*self.model().expert(i, ex), z, v, c.situ_b1, c.situ_b2)
                for j, x in enumerate(parts):
                    s = s_in if j < 2 else s_lt
                    self.assertLess(float((x @ s.T - sk[ex, :, j]).abs().max()), 1e-6 * float(sk[ex, :, j].abs().max()) + 1e-12)
                    self.assertLess(float((x.norm(dim=-1) - nm[ex, :, j]).abs().max()), 1e-6 * float(nm[ex, :, j].max()))
        # resumable: a sweep stopped after some layers and resumed gives the same bytes
        with tempfile.TemporaryDirectory() as d:
            for n in os.listdir(dump_dir(self.NAME)):
                if not n.startswith("experts."):
                    shutil.copy(os.path.join(dump_dir(self.NAME), n), d)
            part = sweep.sweep(fixture_dir(self.NAME), d, layers=[3, 4], drift=False, log=lambda *_: None)
            self.assertFalse(part["complete"])
            self.assertTrue(os.path.exists(os.path.join(d, sweep.PROGRESS)))
            whole = sweep.sweep(fixture_dir(self.NAME), d, drift=False, log=lambda *_: None)
            self.assertTrue(whole["complete"])
            self.assertFalse(os.path.exists(os.path.join(d, sweep.PROGRESS)))
            for i in (3, 4, 60):
                with open(os.path.join(d, f"experts.{i}.sketch.bin"), "rb") as a, \
                        open(os.path.join(dump_dir(self.NAME), f"experts.{i}.sketch.bin"), "rb") as b:
                    self.assertEqual(a.read(), b.read(), f"layer {i}")

    def test_sketch_miss_probability_is_the_chi_square_cdf(self):
        from k3ref.experts import miss_probability
        g = torch.Generator().manual_seed(5)
        k, rho, n = 16, 1.5, 20000
        chi = torch.randn(n, k, generator=g, dtype=torch.float64).pow(2).sum(-1)
        empirical = float((chi <= k / rho ** 2).double().mean())
        self.assertAlmostEqual(empirical, miss_probability(k, rho), delta=0.005)
        self.assertLess(miss_probability(16, 3), 1e-5)


if __name__ == "__main__":
    unittest.main(verbosity=2 if "-v" in sys.argv else 1, argv=[a for a in sys.argv if a != "-v"])

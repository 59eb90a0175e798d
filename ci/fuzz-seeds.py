#!/usr/bin/env python3
"""Writes the fuzz gate's seed corpora: conformance/src/test/resources/k3j/gates/FuzzGateInputs/<target>/.

Every reproducer of a refusal the readers once lacked is a seed here (named after what it is), next to a few
valid inputs for the fuzzer to mutate from. The fuzz gate replays every file in regression mode; findings
that ci/fuzz saves are added beside them by hand. Deterministic: rerunning rewrites the same bytes.
"""
import json, os, struct, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "conformance/src/test/resources/k3j/gates/FuzzGateInputs")


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode("utf-8"))


def safetensors(header_bytes, data=b""):
    return struct.pack("<Q", len(header_bytes)) + header_bytes + data


def entry(name_bytes, extra=b""):
    return b'{' + extra + b'"' + name_bytes + b'":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'


# ---- safetensors header reader (+ the inspect summary)
put("safetensors", "valid-one-tensor", safetensors(entry(b"language_model.model.norm.weight"), b"\0" * 4))
put("safetensors", "name-byte-ff", safetensors(entry(b"bad\xffname"), b"\0" * 4))
put("safetensors", "name-overlong-c1a1", safetensors(entry(b"bad\xc1\xa1name"), b"\0" * 4))
put("safetensors", "name-cesu-eda080", safetensors(entry(b"bad\xed\xa0\x80name"), b"\0" * 4))
put("safetensors", "metadata-lone-surrogate", safetensors(entry(b"t", b'"__metadata__":{"k":"\\ud800"},'), b"\0" * 4))
put("safetensors", "name-lone-surrogate-escape", safetensors(entry(b"x\\udc00y"), b"\0" * 4))
put("safetensors", "layers-999999999", safetensors(entry(b"language_model.model.layers.999999999.input_layernorm.weight"), b"\0" * 4))
put("safetensors", "layers-99999999", safetensors(entry(b"language_model.model.layers.99999999.input_layernorm.weight"), b"\0" * 4))
put("safetensors", "header-length-huge", struct.pack("<Q", 1 << 62) + b"{}")
put("safetensors", "shape-overflow", safetensors(b'{"t":{"dtype":"F32","shape":[4294967296,4294967296,8],"data_offsets":[0,4]}}', b"\0" * 4))

# ---- config reader
mini = json.load(open(os.path.join(ROOT, "oracle-fixtures/mini-k3-93/config.json")))


def cfg(name, edit):
    c = json.loads(json.dumps(mini))
    edit(c["text_config"])
    put("config", name, json.dumps(c, indent=1))


cfg("valid-mini-k3-93", lambda t: None)
cfg("num-hidden-layers-2147483647", lambda t: t.update(num_hidden_layers=2147483647))
cfg("num-experts-2147483647", lambda t: t.update(num_experts=2147483647))
cfg("quant-method-fp8", lambda t: t["quantization_config"].update(quant_method="fp8"))
cfg("quant-format-nvfp4", lambda t: t["quantization_config"].update(format="nvfp4"))
cfg("quant-num-bits-8", lambda t: t["quantization_config"]["config_groups"]["group_0"]["weights"].update(num_bits=8))
cfg("attn-res-block-size-huge", lambda t: t.update(attn_res_block_size=2147483647))
cfg("routed-scaling-factor-1e30", lambda t: t.update(routed_scaling_factor=1e30))
cfg("situ-beta-1e30", lambda t: t.update(activation_situ_beta=1e30))
cfg("bos-token-outside-vocab", lambda t: t.update(eos_token_id=1 << 30))
cfg("max-positions-zero", lambda t: t.update(max_position_embeddings=0))
put("config", "empty-object", "{}")
put("config", "empty-file", b"")
put("config", "not-json", b"\xff\xfe{")

# ---- index.json (beside the tiny oracle's first shard)
tiny_index = json.load(open(os.path.join(ROOT, "oracle-fixtures/tiny-k3/model.safetensors.index.json")))
first = "model-00001-of-00002.safetensors"
valid = {"metadata": tiny_index.get("metadata", {}), "weight_map": {k: v for k, v in tiny_index["weight_map"].items() if v == first}}
put("index", "valid-one-shard", json.dumps(valid))
put("index", "missing-shard", json.dumps({"weight_map": {"a": "model-00009-of-00009.safetensors"}}))
put("index", "path-traversal", json.dumps({"weight_map": {"a": "../../etc/passwd"}}))
put("index", "weight-map-not-object", json.dumps({"weight_map": [1, 2]}))
put("index", "empty", b"")

# ---- dump manifest (over the 93-layer oracle's arrays)
man = json.load(open(os.path.join(ROOT, "reference-dumps/mini-k3-93/manifest.json")))


def dump(name, edit):
    m = json.loads(json.dumps(man))
    edit(m)
    put("dump", name, json.dumps(m))


dump("valid-mini-k3-93", lambda m: None)
dump("budget-factor-1e12", lambda m: m["budget"].update(factor=1e12))
dump("budget-widths-2147483647", lambda m: [s.update(width=2147483647) for s in list(m["budget"]["stages"].values()) + [m["budget"]["logits"]]])
dump("layer-40-mixer-mla", lambda m: m["layers"][40].update(mixer="mla"))
dump("no-sha256", lambda m: [a.pop("sha256") for a in m["arrays"].values()])
dump("ids-empty", lambda m: m.update(ids=[]))
dump("eps32-negative", lambda m: m["budget"].update(eps32=-1))
dump("array-file-traversal", lambda m: m["arrays"]["layers.40.attn_out"].update(file="../manifest.json"))
dump("shape-negative", lambda m: m["arrays"]["layers.40.attn_out"].update(shape=[-1, 40]))

# ---- trunk manifest (beside a 65536-byte trunk.bin)
def trunk(name, edit):
    t = {"format": "k3j-trunk", "version": 1, "n_layers": 1, "align": 4096, "file": "trunk.bin", "file_size": 65536,
         "source": {"shards": [{"name": "model-00001-of-00001.safetensors", "size": 100000}], "header_sha256": "0" * 64, "sample_sha256": "0" * 64},
         "layers": [{"layer": 0, "file_off": 0, "nbytes": 8, "crc32c": "00000000", "shard": "model-00001-of-00001.safetensors", "shard_off": 0,
                     "tensors": {"language_model.model.layers.0.input_layernorm.weight": {"off": 0, "nbytes": 8, "dtype": "BF16", "shape": [4]}}}]}
    edit(t)
    put("trunk", name, json.dumps(t))


trunk("valid-one-layer", lambda t: None)
trunk("crc-zero-text", lambda t: t["layers"][0].update(crc32c="0"))
trunk("run-past-end", lambda t: t["layers"][0].update(nbytes=1 << 40))
trunk("tensor-past-run", lambda t: t["layers"][0]["tensors"]["language_model.model.layers.0.input_layernorm.weight"].update(off=4096))
trunk("n-layers-huge", lambda t: t.update(n_layers=2147483647))
trunk("shape-overflow", lambda t: t["layers"][0]["tensors"]["language_model.model.layers.0.input_layernorm.weight"].update(shape=[1 << 62, 1 << 62]))

# ---- command line (arguments separated by NUL)
def cli(name, *args):
    put("cli", name, "\0".join(args))


cli("ids-arabic-indic-digits", "oracle-fixtures/tiny-k3", "--ids", "\u0661\u0662")
cli("trunk-gb-infinity", "oracle-fixtures/tiny-k3", "--ids", "1", "--trunk", "t", "--trunk-gb", "Infinity")
cli("trunk-gb-1e308", "oracle-fixtures/tiny-k3", "--ids", "1", "--trunk", "t", "--trunk-gb", "1e308")
cli("cache-gb-nan", "oracle-fixtures/tiny-k3", "--ids", "1", "--cache-gb", "NaN")
cli("out-into-missing-folder", "oracle-fixtures/tiny-k3", "--ids", "1", "--out", "/nonexistent-k3j/x.json")
cli("dump-logits-into-missing-folder", "oracle-fixtures/tiny-k3", "--ids", "1", "--dump-logits", "/nonexistent-k3j/l.bin")
cli("ids-overflow", "oracle-fixtures/tiny-k3", "--ids", "99999999999")
cli("valid-run-flags", "oracle-fixtures/tiny-k3", "--ids", "1,2,3", "--gen", "2", "--out", "/tmp/k3-fuzz-never-written.json")
cli("conform-chart-missing-folder", "conform", "oracle-fixtures/mini-k3-93", "--chart", "/nonexistent-k3j/c.svg")
cli("help", "--help")
print("seeds written under", os.path.relpath(OUT, ROOT))

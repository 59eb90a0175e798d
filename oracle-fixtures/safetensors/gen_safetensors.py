#!/usr/bin/env python3
"""Writes the safetensors reader's fixtures and MANIFEST.json (python3 stdlib only, deterministic).

    python3 oracle-fixtures/safetensors/gen_safetensors.py      # rewrites valid/, refused/, MANIFEST.json

valid/   files the reader must accept; the manifest holds every tensor's dtype, shape, shard, absolute
         offset, raw bytes (hex) and widened float32 bit patterns (hex), computed here from the bits
         independently of the Java code, so the gate can compare bit for bit.
refused/ malformed checkpoints; the manifest names the rule the reader must report ([rule] in the
         message, CheckpointException.Rule.id()) and fragments its message must contain.

Every case is built to catch a plausible wrong reader: offsets out of header order, unaligned F32,
signalling NaNs with payloads (a reader that quiets them fails), U8 above 127 (a signed read fails),
\\u-escaped and raw UTF-8 names (a reader that replaces non-ASCII fails), products that wrap to 0
(a reader without overflow checks accepts them), shard files whose case-insensitive order differs
from byte order, and so on.
"""
import hashlib
import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
SIZE = {"BOOL": 1, "U8": 1, "I8": 1, "F16": 2, "BF16": 2, "I16": 2, "I32": 4, "F32": 4, "F64": 8, "I64": 8}
WIDENABLE = ("BF16", "F16", "F32", "U8")


# ------------------------------------------------------------------------------------------------
# independent float32 bit patterns of the widened values

def f16_to_f32_bits(h):
    """IEEE binary16 -> binary32 bits, exactly; NaN payloads (signalling or quiet) keep their bits."""
    sign = (h & 0x8000) << 16
    exp = (h >> 10) & 0x1F
    mant = h & 0x3FF
    if exp == 0x1F:
        return sign | 0x7F800000 | (mant << 13)
    if exp == 0:
        if mant == 0:
            return sign
        # subnormal half: normalise into a float32 normal
        e = -14
        while not mant & 0x400:
            mant <<= 1
            e -= 1
        mant &= 0x3FF
        return sign | ((e + 127) << 23) | (mant << 13)
    return sign | ((exp - 15 + 127) << 23) | (mant << 13)


def f32_bits_of(value):
    return struct.unpack("<I", struct.pack("<f", value))[0]


def widened_bits(dtype, raw):
    if dtype == "BF16":
        return [h << 16 for h in struct.unpack("<%dH" % (len(raw) // 2), raw)]
    if dtype == "F16":
        return [f16_to_f32_bits(h) for h in struct.unpack("<%dH" % (len(raw) // 2), raw)]
    if dtype == "F32":
        return list(struct.unpack("<%dI" % (len(raw) // 4), raw))
    if dtype == "U8":
        return [f32_bits_of(float(b)) for b in raw]
    return None


# ------------------------------------------------------------------------------------------------
# writing safetensors files by hand (the header JSON text is written literally, so escapes are ours)

def jstr(s):
    """A JSON string literal with non-ASCII written as \\u escapes (surrogate pairs above the BMP)."""
    return json.dumps(s, ensure_ascii=True)


def entry_json(dtype, shape, begin, end):
    return '{"dtype":%s,"shape":[%s],"data_offsets":[%d,%d]}' % (
        jstr(dtype), ",".join(str(d) for d in shape), begin, end)


def write_raw(path, header_bytes, data, header_len=None):
    """[u64 LE header length][header][data]; header_len overrides the length field (for lies)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    n = len(header_bytes) if header_len is None else header_len
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", n))
        f.write(header_bytes)
        f.write(data)


class Shard:
    """Tensors placed in the data section in `data_order`, listed in the header in insertion order."""

    def __init__(self):
        self.items = []          # (name, json_key_literal, dtype, shape, raw)
        self.metadata = None     # literal JSON text of the __metadata__ value
        self.tail = b""
        self.pad_to = 1

    def add(self, name, dtype, shape, raw, key_literal=None):
        n = 1
        for d in shape:
            n *= d
        assert len(raw) == n * SIZE[dtype], (name, len(raw), n)
        self.items.append((name, key_literal or jstr(name), dtype, shape, raw))

    def write(self, path, data_order=None):
        order = data_order if data_order is not None else list(range(len(self.items)))
        assert sorted(order) == list(range(len(self.items)))
        offsets = {}
        data = b""
        for i in order:
            raw = self.items[i][4]
            offsets[i] = (len(data), len(data) + len(raw))
            data += raw
        parts = []
        if self.metadata is not None:
            parts.append('"__metadata__":' + self.metadata)
        for i, (name, key, dtype, shape, raw) in enumerate(self.items):
            parts.append(key + ":" + entry_json(dtype, shape, *offsets[i]))
        header = ("{" + ",".join(parts) + "}").encode("utf-8")
        while len(header) % self.pad_to:
            header += b" "
        write_raw(path, header, data + self.tail)
        base = 8 + len(header)
        tensors = []
        for i, (name, key, dtype, shape, raw) in enumerate(self.items):
            t = {"name": name, "dtype": dtype, "shape": shape, "offset": base + offsets[i][0],
                 "length": len(raw), "bytes_hex": raw.hex()}
            bits = widened_bits(dtype, raw)
            if bits is None:
                t["widen"] = "not-widenable"
            else:
                t["widened_bits"] = ["%08x" % b for b in bits]
            tensors.append(t)
        return tensors


def pack(fmt, values):
    return struct.pack("<%d%s" % (len(values), fmt), *values)


# ------------------------------------------------------------------------------------------------
# valid cases

def valid_dtypes(cases):
    s = Shard()
    s.metadata = '{"format":"pt","note":"caf\\u00e9"}'
    # BF16, odd length 15: sNaN with payload, qNaN with payload, +-Inf, -0, +0, subnormals, normals
    s.add("bf16.odd", "BF16", [3, 5], pack("H", [
        0x7F81, 0xFFC1, 0x7F80, 0xFF80, 0x8000, 0x0000, 0x0001, 0x807F, 0x3F80, 0xC049,
        0x7F7F, 0x0080, 0x3E20, 0x4B7F, 0xBF01]))
    # F16, odd length 13: sNaN payload (quieting changes bit 22), qNaN, +-Inf, -0, subnormals, max
    s.add("f16.odd", "F16", [13], pack("H", [
        0x7D01, 0xFE01, 0x7C00, 0xFC00, 0x8000, 0x0001, 0x03FF, 0x8200, 0x7BFF, 0x3C00,
        0xC000, 0x0400, 0x3555]))
    # F32 at an odd (unaligned) offset: sNaN payload, -NaN, +-Inf, -0, smallest subnormal
    s.add("f32.unaligned", "F32", [2, 3], pack("I", [
        0x7F800001, 0xFFC00123, 0x7F800000, 0x80000000, 0x00000001, 0x3F8CCCCD]))
    # U8 above 127: a signed-byte widening gives negatives
    s.add("u8.bytes", "U8", [7], bytes([0, 1, 127, 128, 200, 254, 255]))
    # I32: known, readable, not widenable
    s.add("i32.ids", "I32", [3], struct.pack("<3i", -1, 2 ** 31 - 1, -2 ** 31))
    s.add("scalar", "F32", [], struct.pack("<I", 0x40490FDB))
    s.add("empty", "BF16", [2, 0], b"")
    # names: \u escape (C engine turns it into '?'), raw UTF-8, \" and \\, a surrogate pair, \/ and \t
    s.add("caf\u00e9.w", "BF16", [1], pack("H", [0x4049]), key_literal='"caf\\u00e9.w"')
    s.add("\u03c9.raw", "BF16", [1], pack("H", [0x3F80]), key_literal='"\u03c9.raw"')
    s.add('quote"back\\slash', "U8", [2], bytes([3, 4]), key_literal='"quote\\"back\\\\slash"')
    s.add("\U0001F600.emoji", "U8", [1], bytes([9]), key_literal='"\\ud83d\\ude00.emoji"')
    s.add("a/b\tc", "U8", [1], bytes([10]), key_literal='"a\\/b\\tc"')
    s.tail = bytes([0xAB] * 13)
    # data in an order unrelated to the header's: the first tensor in the header is not at offset 0
    n = len(s.items)
    order = [5, 3, 11, 2, 0, 7, 10, 1, 8, 4, 9, 6]
    assert sorted(order) == list(range(n))
    tensors = s.write(os.path.join(HERE, "valid/dtypes.safetensors"), order)
    assert tensors[2]["offset"] % 2 == 1, "the F32 tensor must start at an odd absolute offset"
    for t in tensors:
        t["shard"] = 0
        t["file"] = "dtypes.safetensors"
    cases.append({
        "name": "dtypes", "path": "valid/dtypes.safetensors", "kind": "valid",
        "what": "BF16/F16/F32/U8/I32 with NaN payloads, +-Inf, -0, subnormals, odd lengths, an unaligned F32, "
                "a rank-0 scalar, an empty tensor, escaped and unicode names, data out of header order, "
                "13 trailing bytes",
        "shards": ["dtypes.safetensors"], "metadata": {"format": "pt", "note": "caf\u00e9"},
        "trailing_bytes": {"dtypes.safetensors": 13}, "tensors": tensors})


def valid_sharded(cases):
    d = os.path.join(HERE, "valid/sharded")
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    a = Shard()
    a.pad_to = 8    # the safetensors writer pads the header with spaces to 8-byte alignment
    a.metadata = '{"format":"pt"}'
    a.add("model.embed_tokens.weight", "BF16", [2, 3], pack("H", [0x3F80, 0x4000, 0x4040, 0xBF80, 0xC000, 0x7FC0]))
    a.add("model.layers.0.input_layernorm.weight", "F32", [2], pack("I", [0x3F800000, 0xBF000000]))
    b = Shard()
    b.pad_to = 8
    b.add("model.layers.1.input_layernorm.weight", "F16", [3], pack("H", [0x3C00, 0x3800, 0x0001]))
    b.add("lm_head.weight", "U8", [4], bytes([255, 0, 128, 7]))
    tensors = []
    for i, (shard, fname) in enumerate(zip((a, b), names)):
        for t in shard.write(os.path.join(d, fname), list(reversed(range(len(shard.items))))):
            t["shard"] = i
            t["file"] = fname
            tensors.append(t)
    index = {"metadata": {"total_size": sum(t["length"] for t in tensors)},
             "weight_map": {t["name"]: t["file"] for t in tensors}}
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
    cases.append({
        "name": "sharded", "path": "valid/sharded", "kind": "valid",
        "what": "two shards and a model.safetensors.index.json; a tensor in the second shard",
        "shards": names, "metadata": None, "trailing_bytes": {}, "tensors": tensors})


def valid_unindexed(cases):
    d = os.path.join(HERE, "valid/unindexed")
    # byte-wise order puts "B" (0x42) before "a" (0x61); a case-insensitive sort does not
    names = ["B.safetensors", "a.safetensors"]
    tensors = []
    for i, fname in enumerate(names):
        s = Shard()
        s.add("t%d" % i, "F32", [1], pack("I", [0x3F800000 + i]))
        for t in s.write(os.path.join(d, fname)):
            t["shard"] = i
            t["file"] = fname
            tensors.append(t)
    cases.append({
        "name": "unindexed", "path": "valid/unindexed", "kind": "valid",
        "what": "two shards without an index: numbered in byte-wise file name order (B before a)",
        "shards": names, "metadata": None, "trailing_bytes": {}, "tensors": tensors})


# ------------------------------------------------------------------------------------------------
# refused cases

def refused(cases, name, what, rule, must_name, path=None):
    cases.append({"name": name, "path": path or "refused/%s.safetensors" % name, "kind": "refused",
                  "what": what, "rule": rule, "must_name": must_name})


def header_file(name, header_text, data=b"", header_len=None):
    write_raw(os.path.join(HERE, "refused/%s.safetensors" % name),
              header_text.encode("utf-8") if isinstance(header_text, str) else header_text, data, header_len)


def refused_cases(cases):
    os.makedirs(os.path.join(HERE, "refused"), exist_ok=True)
    with open(os.path.join(HERE, "refused/too_short.safetensors"), "wb") as f:
        f.write(b"\x10\x00\x00\x00\x00")
    refused(cases, "too_short", "5 bytes: not even a header length", "too-short", ["shorter than the 8-byte header length"])

    header_file("header_past_eof", '{"w":' + entry_json("U8", [1], 0, 1) + "}", b"\x00", header_len=1000)
    refused(cases, "header_past_eof", "header length 1000 in a 55-byte file", "header-length", ["runs past the end of the file"])

    header_file("header_absurd", "{}", b"", header_len=2 ** 63)
    refused(cases, "header_absurd", "header length 2^63 (negative as a signed long)", "header-length",
            ["9223372036854775808", "absurd"])

    header_file("header_huge", "{}", b"", header_len=200 << 20)
    refused(cases, "header_huge", "header length 200 MiB, above the 100 MiB limit", "header-length", ["absurd"])

    header_file("header_length_one", "{", b" ")
    refused(cases, "header_length_one", "header length 1", "header-length", ["too small"])

    header_file("header_array", "[1,2]")
    refused(cases, "header_array", "the header is a JSON array", "header-not-object", ["JSON object"])

    header_file("header_not_json", "{not json at all}")
    refused(cases, "header_not_json", "the header is not JSON", "header-not-json", ["not valid JSON"])

    header_file("trailing_comma", '{"w":' + entry_json("U8", [1], 0, 1) + ",}", b"\x01")
    refused(cases, "trailing_comma", "a trailing comma (the C reader tolerates it; JSON does not)", "header-not-json",
            ["not valid JSON"])

    header_file("content_after", '{"w":' + entry_json("U8", [1], 0, 1) + '} {"x":1}', b"\x01")
    refused(cases, "content_after", "a second JSON value after the header object", "header-not-json",
            ["content after the header object"])

    header_file("utf16_header", '{"w":{}}'.encode("utf-16-le"))
    refused(cases, "utf16_header", "a UTF-16 header (Jackson would auto-detect it)", "header-not-json", ["NUL"])

    header_file("overlap", '{"a":' + entry_json("F32", [2], 0, 8) + ',"b":' + entry_json("F32", [2], 4, 12) + "}",
                bytes(12))
    refused(cases, "overlap", "b's bytes [4,12) overlap a's [0,8)", "overlap", ['tensor "b"', 'overlap tensor "a"'])

    header_file("offsets_past_data", '{"w":' + entry_json("F32", [4], 0, 16) + "}", bytes(8))
    refused(cases, "offsets_past_data", "data_offsets end 16 in an 8-byte data section", "out-of-data",
            ['tensor "w"', "past the end of the data section (8 bytes)"])

    header_file("data_cut_short", '{"a":' + entry_json("U8", [3], 0, 3) + ',"w":' + entry_json("F32", [4], 3, 19) + "}",
                bytes(12))
    refused(cases, "data_cut_short", "file truncated in the middle of tensor w", "out-of-data",
            ['tensor "w"', "past the end of the data section (12 bytes)"])

    header_file("size_mismatch", '{"w":' + entry_json("F32", [3], 0, 8) + "}", bytes(8))
    refused(cases, "size_mismatch", "F32 [3] in 8 bytes", "size-mismatch", ['tensor "w"', "span 8 bytes", "implies 12"])

    header_file("unknown_dtype", '{"w":' + entry_json("bf16", [1], 0, 2) + "}", bytes(2))
    refused(cases, "unknown_dtype", "dtype \"bf16\" (dtypes are case-sensitive)", "unknown-dtype", ['unknown dtype "bf16"'])

    header_file("negative_dim", '{"w":' + entry_json("U8", [-1, 4], 0, 0) + "}")
    refused(cases, "negative_dim", "shape [-1, 4]", "bad-shape", ["negative dimension -1"])

    header_file("float_dim", '{"w":{"dtype":"U8","shape":[2.0],"data_offsets":[0,2]}}', bytes(2))
    refused(cases, "float_dim", "shape [2.0]: not an integer", "bad-shape", ["non-integer"])

    header_file("huge_dim", '{"w":{"dtype":"U8","shape":[18446744073709551616],"data_offsets":[0,0]}}')
    refused(cases, "huge_dim", "a dimension of 2^64", "bad-shape", ["does not fit in 64 bits"])

    # 2^32 * 2^32 wraps to 0 in 64 bits: offsets [0,0] then look consistent to a reader without checks
    header_file("shape_overflow", '{"w":' + entry_json("U8", [2 ** 32, 2 ** 32], 0, 0) + "}")
    refused(cases, "shape_overflow", "shape [2^32, 2^32]: the element count wraps to 0", "shape-overflow",
            ['tensor "w"', "overflows"])

    # 2^62 elements fit, 2^62 * 4 bytes wraps to 0
    header_file("bytes_overflow", '{"w":' + entry_json("F32", [2 ** 61, 2], 0, 0) + "}")
    refused(cases, "bytes_overflow", "F32 [2^61, 2]: the byte count wraps to 0", "shape-overflow", ['tensor "w"', "overflows"])

    header_file("duplicate_name", '{"w":' + entry_json("U8", [1], 0, 1) + ',"w":' + entry_json("U8", [1], 1, 2) + "}",
                bytes(2))
    refused(cases, "duplicate_name", "the name w twice in one header", "duplicate-name", ['tensor "w"', "twice"])

    header_file("metadata_non_string", '{"__metadata__":{"format":1},"w":' + entry_json("U8", [1], 0, 1) + "}", bytes(1))
    refused(cases, "metadata_non_string", "__metadata__ maps format to a number", "bad-metadata",
            ['"format"', "not a string"])

    header_file("metadata_not_object", '{"__metadata__":"pt"}')
    refused(cases, "metadata_not_object", "__metadata__ is a string", "bad-metadata", ["not a JSON object"])

    header_file("begin_after_end", '{"w":' + entry_json("U8", [0], 8, 4) + "}", bytes(8))
    refused(cases, "begin_after_end", "data_offsets [8, 4]", "bad-offsets", ['tensor "w"', "after end"])

    header_file("negative_offset", '{"w":' + entry_json("U8", [4], -4, 0) + "}", bytes(8))
    refused(cases, "negative_offset", "data_offsets [-4, 0]", "bad-offsets", ["negative data offset"])

    header_file("entry_not_object", '{"w":[1,2]}')
    refused(cases, "entry_not_object", "a tensor entry that is an array", "bad-entry", ['tensor "w"', "not a JSON object"])

    header_file("missing_offsets", '{"w":{"dtype":"U8","shape":[1]}}', bytes(1))
    refused(cases, "missing_offsets", "no data_offsets", "bad-entry", ["missing data_offsets"])

    header_file("unknown_key", '{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"quant":"nf4"}}', bytes(1))
    refused(cases, "unknown_key", "an unknown key inside a tensor entry (refused: it could change the bytes' meaning)",
            "bad-entry", ['unknown key "quant"'])

    # directories
    d = os.path.join(HERE, "refused/duplicate_across")
    for fname in ("a.safetensors", "b.safetensors"):
        s = Shard()
        s.add("w", "U8", [1], b"\x01")
        s.write(os.path.join(d, fname))
    refused(cases, "duplicate_across", "the name w in two shards", "duplicate-name",
            ['tensor "w"', "also in shard a.safetensors"], path="refused/duplicate_across")

    d = os.path.join(HERE, "refused/partial")
    s = Shard()
    s.add("model.layers.0.a", "U8", [1], b"\x01")
    s.write(os.path.join(d, "model-00001-of-00002.safetensors"))
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 3}, "weight_map": {
            "model.layers.0.a": "model-00001-of-00002.safetensors",
            "model.layers.0.b": "model-00001-of-00002.safetensors",
            "model.layers.1.a": "model-00002-of-00002.safetensors"}}, f, indent=2)
    refused(cases, "partial", "the index lists a missing shard and a tensor its shard lacks: ONE error naming both",
            "partial-download", ["partial download", "model-00002-of-00002.safetensors", '"model.layers.0.b"'],
            path="refused/partial")

    d = os.path.join(HERE, "refused/index_escape")
    s = Shard()
    s.add("w", "U8", [1], b"\x01")
    s.write(os.path.join(d, "model.safetensors"))
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"weight_map": {"w": "../model.safetensors"}}, f)
    refused(cases, "index_escape", "the index names a shard outside the directory", "bad-index",
            ["not a .safetensors file name in the directory"], path="refused/index_escape")

    d = os.path.join(HERE, "refused/no_shards")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "README.txt"), "w") as f:
        f.write("a model directory without any .safetensors file\n")
    refused(cases, "no_shards", "a directory without .safetensors files", "no-shards", ["no .safetensors files"],
            path="refused/no_shards")


def main():
    for sub in ("valid", "refused"):
        shutil.rmtree(os.path.join(HERE, sub), ignore_errors=True)
    cases = []
    valid_dtypes(cases)
    valid_sharded(cases)
    valid_unindexed(cases)
    refused_cases(cases)
    files = {}
    for root, _, names in os.walk(HERE):
        for n in names:
            p = os.path.join(root, n)
            rel = os.path.relpath(p, HERE)
            if rel.split(os.sep)[0] in ("valid", "refused"):
                with open(p, "rb") as f:
                    files[rel.replace(os.sep, "/")] = hashlib.sha256(f.read()).hexdigest()
    manifest = {
        "generator": "gen_safetensors.py",
        "about": "valid cases: read, compare raw bytes and widened float32 bits exactly (widening is exact, "
                 "tolerance 0); refused cases: the reader and `k3 inspect` must refuse with [rule] and every "
                 "must_name fragment in the message",
        "tolerance_ulp": 0,
        "files": dict(sorted(files.items())),
        "cases": cases,
    }
    with open(os.path.join(HERE, "MANIFEST.json"), "w") as f:
        json.dump(manifest, f, indent=1, ensure_ascii=True)
        f.write("\n")
    print("wrote %d cases, %d files" % (len(cases), len(files)))


if __name__ == "__main__":
    main()

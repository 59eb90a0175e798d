"""Minimal safetensors reader/writer (stdlib json + struct + torch/numpy; no safetensors package).

Layout: u64 little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets:
[begin, end]}, "__metadata__": {...}}, then the data; offsets are relative to 8 + N.
The dtype is taken from the header (docs/semantics.md §12.5); widening to float64/float32 is exact (BF16 = the
top 16 bits of an F32).
"""
from __future__ import annotations

import hashlib
import json
import os
import struct

import numpy as np
import torch

ELEMENT_SIZE = {"U8": 1, "I8": 1, "BF16": 2, "F16": 2, "F32": 4, "F64": 8, "I32": 4, "I64": 8}
_NP = {"U8": np.uint8, "I8": np.int8, "F16": np.float16, "F32": np.float32, "F64": np.float64,
       "I32": np.int32, "I64": np.int64}


class TensorInfo:
    __slots__ = ("name", "path", "dtype", "shape", "offset", "nbytes")

    def __init__(self, name, path, dtype, shape, offset, nbytes):
        self.name, self.path, self.dtype, self.shape, self.offset, self.nbytes = name, path, dtype, shape, offset, nbytes

    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n


def read_header(path):
    """Returns (header dict, header bytes, data base offset). Refuses impossible lengths."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise ValueError(f"{path}: too short for a header length")
        (n,) = struct.unpack("<Q", raw)
        if n == 0 or 8 + n > size:
            raise ValueError(f"{path}: header length {n} is impossible for a {size}-byte file")
        hb = f.read(n)
    if len(hb) != n:
        raise ValueError(f"{path}: short header read")
    return json.loads(hb.decode("utf-8")), hb, 8 + n


def index_file(path):
    """{name: TensorInfo} for one shard, with every offset and size checked."""
    header, _, base = read_header(path)
    size = os.path.getsize(path)
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        dt = meta["dtype"]
        if dt not in ELEMENT_SIZE:
            raise ValueError(f"{path}: {name}: unsupported dtype {dt}")
        shape = [int(s) for s in meta["shape"]]
        b, e = (int(v) for v in meta["data_offsets"])
        info = TensorInfo(name, path, dt, shape, base + b, e - b)
        if info.nbytes != info.numel() * ELEMENT_SIZE[dt]:
            raise ValueError(f"{path}: {name} spans {info.nbytes} bytes but shape {shape} implies "
                             f"{info.numel() * ELEMENT_SIZE[dt]}")
        if base + e > size:
            raise ValueError(f"{path}: {name} ends past EOF")
        out[name] = info
    return out


def read_raw(info):
    with open(info.path, "rb") as f:
        f.seek(info.offset)
        b = f.read(info.nbytes)
    if len(b) != info.nbytes:
        raise ValueError(f"short read on {info.name} at +{len(b)} of {info.nbytes}")
    return b


def decode(info, raw, dtype=torch.float64):
    """Bytes -> torch tensor. U8/I* stay integer; floats widen exactly to ``dtype``."""
    if info.dtype == "BF16":
        # exact widening in one pass (bfloat16 -> float64 is exact); little-endian host assumed, as everywhere here
        t = torch.frombuffer(bytearray(raw), dtype=torch.bfloat16).reshape(info.shape)
        return t.to(dtype)
    else:
        arr = np.frombuffer(raw, dtype=np.dtype(_NP[info.dtype]).newbyteorder("<"))
    t = torch.from_numpy(np.array(arr, copy=True)).reshape(info.shape)
    if info.dtype in ("U8", "I8", "I32", "I64"):
        return t
    return t.to(dtype)


def to_bf16_bytes(t):
    """float tensor -> BF16 little-endian bytes, round-to-nearest-even (finite inputs)."""
    u = t.detach().to(torch.float32).contiguous().numpy().view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return rounded.astype("<u2").tobytes()


def bf16_round(t):
    """The value a float tensor has after a round trip through BF16 (as float64)."""
    u = t.detach().to(torch.float32).contiguous().numpy().view(np.uint32).astype(np.uint64)
    r = (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32)
    return torch.from_numpy(r.view(np.float32).copy()).reshape(t.shape).to(torch.float64)


def tensor_bytes(t, dtype):
    if dtype == "BF16":
        return to_bf16_bytes(t)
    if dtype == "F32":
        return t.detach().to(torch.float32).contiguous().numpy().astype("<f4").tobytes()
    if dtype == "F64":
        return t.detach().to(torch.float64).contiguous().numpy().astype("<f8").tobytes()
    if dtype == "U8":
        return t.detach().to(torch.uint8).contiguous().numpy().tobytes()
    raise ValueError(f"cannot write dtype {dtype}")


def write_file(path, tensors, metadata=None):
    """tensors: ordered list of (name, dtype, shape, bytes). Data laid out in list order, no gaps;
    header JSON compact with keys in that order, padded with spaces to a multiple of 8 bytes."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    off = 0
    for name, dt, shape, b in tensors:
        if len(b) != int(np.prod(shape, dtype=np.int64)) * ELEMENT_SIZE[dt]:
            raise ValueError(f"{name}: {len(b)} bytes do not match {dt}{list(shape)}")
        header[name] = {"dtype": dt, "shape": [int(s) for s in shape], "data_offsets": [off, off + len(b)]}
        off += len(b)
    hb = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for _, _, _, b in tensors:
            f.write(b)


def sha256_file(path, limit=None):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        remaining = limit
        while True:
            n = 1 << 20 if remaining is None else min(1 << 20, remaining)
            if n == 0:
                break
            b = f.read(n)
            if not b:
                break
            h.update(b)
            if remaining is not None:
                remaining -= len(b)
    return h.hexdigest()


def header_sha256(path):
    """sha256 of the 8-byte length plus the header JSON bytes: identifies a shard without hashing its data."""
    _, hb, base = read_header(path)
    return sha256_file(path, limit=base)

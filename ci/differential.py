#!/usr/bin/env python3
"""Fuzzed .npy and .npz files and what numpy and Python's zipfile read from them (docs/formats.md, "npy and npz").

    differential.py OUT_DIR --seed S --count N

Writes OUT_DIR/<i>.npy or .npz (valid files from numpy's and zipfile's own writers, then 0-3 mutations each) and
OUT_DIR/read.jsonl, one line per file: the mutations made and what the reference readers read, which the
ReaderDifferentialGate compares with what k3j reads. An array is told by its dtype string, Fortran flag, shape and
the sha256 of its C-order bytes; another npz entry by the sha256 of its bytes.
"""
import argparse
import hashlib
import io
import json
import os
import random
import struct
import sys
import warnings
import zipfile
import zlib

import numpy as np

warnings.simplefilter("ignore")
np.seterr(all="ignore")

MAGIC = b"\x93NUMPY"


def sha(b):
    return hashlib.sha256(b).hexdigest()


def array_reading(a):
    if not isinstance(a, np.ndarray):
        return {"raw": sha(bytes(a))}
    return {"descr": a.dtype.str, "fortran": bool(a.flags.f_contiguous and not a.flags.c_contiguous and a.ndim > 1),
            "shape": list(a.shape), "sha256": sha(a.tobytes(order="C"))}


def numpy_reads(path):
    """What numpy.load reads (every key of an npz), or why it refuses."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = np.load(path, allow_pickle=False)
            if isinstance(r, np.lib.npyio.NpzFile):
                with r:
                    return {"arrays": {k: array_reading(r[k]) for k in r.files}}
            return {"arrays": {"": array_reading(r)}}
    except Exception as e:  # noqa: BLE001 - any refusal counts
        return {"refused": f"{type(e).__name__}: {e}"[:200]}


def zipfile_reads(path):
    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
            if len(set(names)) != len(names):
                return {"entries": None, "duplicates": True}
            return {"entries": {i.filename: sha(z.read(i)) for i in z.infolist()}}
    except Exception as e:  # noqa: BLE001
        return {"refused": f"{type(e).__name__}: {e}"[:200]}


# ---- valid files --------------------------------------------------------------------------------------------------

DTYPES = ["<f4", "<f4", "<f4", "<i4", "<i4", ">f4", ">i4", "<f8", "<i8", "|u1", "|b1", "<f2"]


def random_array(rng):
    nd = rng.choice([0, 1, 1, 2, 2, 3])
    shape = tuple(rng.randint(0, 5) if rng.random() < 0.1 else rng.randint(1, 6) for _ in range(nd))
    dt = np.dtype(rng.choice(DTYPES))
    n = int(np.prod(shape)) if shape else 1
    raw = bytes(rng.getrandbits(8) for _ in range(n * dt.itemsize))
    a = np.frombuffer(raw, dtype=dt).reshape(shape).copy() if dt.kind != "b" else (np.frombuffer(raw, dtype=np.uint8) & 1).astype(bool).reshape(shape)
    if nd > 1 and rng.random() < 0.2:
        a = np.asfortranarray(a)
    return a


def npy_bytes(a, rng):
    b = io.BytesIO()
    version = rng.choice([None, None, None, (1, 0), (2, 0), (3, 0)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.lib.format.write_array(b, a, version=version, allow_pickle=False)
    return b.getvalue()


def good_npy(rng):
    a = random_array(rng)
    if rng.random() < 0.6:  # most bases are what k3j reads, so the mutations reach its checks
        a = np.ascontiguousarray(a.astype(rng.choice(["<f4", "<i4"])))
    return npy_bytes(a, rng)


class Unseekable(io.RawIOBase):
    def __init__(self):
        self.buf = bytearray()

    def writable(self):
        return True

    def write(self, b):
        self.buf += b
        return len(b)


def good_npz(rng):
    arrays = {f"a{i}": np.ascontiguousarray(random_array(rng).astype(rng.choice(["<f4", "<i4"]))) for i in range(rng.randint(1, 3))}
    manifest = json.dumps({"format": "k3j-candidate", "n": rng.randint(0, 99)}).encode()
    style = rng.choice(["savez", "savez_compressed", "stored", "deflated", "descriptor"])
    if style in ("savez", "savez_compressed"):
        b = io.BytesIO()
        getattr(np, style)(b, **arrays)
        # manifest.json added the way candidate_file.py adds it: a second writer appending to the archive
        b.seek(0)
        with zipfile.ZipFile(b, "a") as z:
            z.writestr("manifest.json", manifest)
        return b.getvalue()
    method = zipfile.ZIP_STORED if style == "stored" else zipfile.ZIP_DEFLATED
    sink = Unseekable() if style == "descriptor" else io.BytesIO()
    with zipfile.ZipFile(sink, "w", method) as z:
        z.writestr("manifest.json", manifest)
        for k, a in arrays.items():
            z.writestr(k + ".npy", npy_bytes(a, rng))
    return bytes(sink.buf) if style == "descriptor" else sink.getvalue()


# ---- mutations ----------------------------------------------------------------------------------------------------

def header_span(b):
    major = b[6] if len(b) > 7 else 1
    start = 10 if major == 1 else 12
    if len(b) < start:
        return start, start
    n = struct.unpack("<H", b[8:10])[0] if major == 1 else struct.unpack("<I", b[8:12])[0]
    return start, min(len(b), start + n)


def with_header(b, text, rng):
    """b with its header dict replaced by text (latin-1 or utf-8), length and padding fixed as numpy writes them."""
    s, e = header_span(b)
    major = b[6]
    raw = text.encode("utf-8" if major == 3 else "latin-1", errors="replace")
    if rng.random() < 0.7:
        pad = (-(s + len(raw) + 1)) % 64
        raw = raw + b" " * pad + b"\n"
    ln = struct.pack("<H", len(raw) & 0xFFFF) if major == 1 else struct.pack("<I", len(raw))
    return b[:8] + ln + raw + b[e:]


def header_text(b):
    s, e = header_span(b)
    return b[s:e].decode("latin-1").rstrip(" \n")


# header edits: (text, its replacement or a list to pick one from), the first occurrence replaced; or a function
HEADER_EDITS = [
    ("}", " 'descr': '>f4', }"),  # a key twice: numpy takes the last
    ("}", " 'shape': (2, 3), }"),
    ("}", " 'fortran_order': True, }"),
    ("{", "{'descr': '<i4', "),
    ("}", " 'extra': 1, }"),  # an extra key: numpy refuses
    ("'descr'", "'note': 'descr', 'descr'"),  # a key's name inside a string
    ("'shape'", "'x': \"'shape': (1,)\", 'shape'"),
    lambda h, r: h.replace("'", '"'),
    ("'<f4'", ["'f4'", "'=f4'", "'float32'", "'|f4'", "'<f8'", "'>f4'", "b'<f4'", "'<' 'f4'", "'\\x3cf4'", "u'<f4'", "('<f4')"]),
    ("'<i4'", ["'i4'", "'int32'", "'>i4'", "'<u4'", "'<i4' ", "'<i8'"]),
    ("False", ["0", "True", "'False'", "None", "False ", "(False)", "not True"]),
    ("(", ["(True, ", "(0x2, ", "(1_0, ", "(-1, ", "(03, ", "(3L, ", "[", "( ", "(+2, ", "(2.0, "]),
    (",)", ")"),
    (", }", ["}", ",, }"]),
    lambda h, r: h + " # comment",
    lambda h, r: r.choice([" ", "\t"]) + h,
    (" ", ["\t", "\n"]),
    ("'shape'", "'sh\\x61pe'"),
    ("'descr'", ["'descr' ", "'d\u00e9scr'"]),
    ("}", "\x00}"),
    lambda h, r: r.choice(["dict(", "("]) + h + ")",
    lambda h, r: h + "\n\n",
    lambda h, r: h[: r.randint(0, max(0, len(h) - 1))],
]


def edit_header(i, h, rng):
    e = HEADER_EDITS[i]
    if callable(e):
        return e(h, rng)
    old, new = e
    return h.replace(old, rng.choice(new) if isinstance(new, list) else new, 1)


def mutate_npy(b, rng, log):
    m = rng.randrange(9)
    if m <= 2:
        i = rng.randrange(len(HEADER_EDITS))
        log.append(f"header edit {i}")
        return with_header(b, edit_header(i, header_text(b), rng), rng)
    if m == 3:
        i, v = rng.choice([(6, rng.choice([0, 1, 2, 3, 4, 255])), (7, rng.choice([0, 1, 2])), (0, 0x92), (3, ord("n"))])
        log.append(f"byte {i} = {v}")
        return b[:i] + bytes([v]) + b[i + 1:]
    if m == 4:
        s, e = header_span(b)
        d = rng.choice([-16, -1, 1, 2, 64, 70000])
        log.append(f"header length {d:+d}")
        n = max(0, e - s + d)
        ln = struct.pack("<H", n & 0xFFFF) if b[6] == 1 else struct.pack("<I", n)
        return b[:8] + ln + b[8 + len(ln):]
    if m == 5:
        cut = rng.randint(0, len(b))
        log.append(f"truncated at {cut}")
        return b[:cut]
    if m == 6:
        extra = bytes(rng.getrandbits(8) for _ in range(rng.choice([1, 4, 8, 64])))
        log.append(f"{len(extra)} bytes appended")
        return b + extra
    if m == 7:
        s, e = header_span(b)
        if e <= s:
            return b
        i = rng.randrange(s, e)
        v = rng.choice([ord(c) for c in "'\",:(){} 01TF\\#\n"] + [rng.getrandbits(8)])
        log.append(f"header byte {i} = {v}")
        return b[:i] + bytes([v]) + b[i + 1:]
    i = rng.randrange(len(b)) if b else 0
    log.append(f"byte {i} flipped")
    return b[:i] + bytes([b[i] ^ (1 << rng.randrange(8))]) + b[i + 1:] if b else b


def zip_records(b):
    """Offsets of the zip's signatures (local, central, end, zip64 end, locator, descriptor)."""
    out = {}
    for sig, name in [(b"PK\x03\x04", "local"), (b"PK\x01\x02", "central"), (b"PK\x05\x06", "end"), (b"PK\x06\x06", "end64"), (b"PK\x06\x07", "loc64"), (b"PK\x07\x08", "desc")]:
        i, found = b.find(sig), []
        while i >= 0:
            found.append(i)
            i = b.find(sig, i + 1)
        out[name] = found
    return out


def put(b, at, fmt, v):
    n = struct.calcsize(fmt)
    if at < 0 or at + n > len(b):
        return b
    return b[:at] + struct.pack(fmt, v) + b[at + n:]


def fix_crc(b):
    """Recomputes every entry's crc in its local and central header from its data (stored entries only), so that a
    mutation inside an entry reaches the readers past the crc check."""
    try:
        with zipfile.ZipFile(io.BytesIO(b)) as z:
            infos = z.infolist()
    except Exception:  # noqa: BLE001
        return b
    cent = zip_records(b)["central"]
    for info, c in zip(infos, cent):
        if info.compress_type != 0:
            continue
        lh = info.header_offset
        if b[lh:lh + 4] != b"PK\x03\x04":
            continue
        n, x = struct.unpack("<HH", b[lh + 26:lh + 30])
        data = b[lh + 30 + n + x: lh + 30 + n + x + info.compress_size]
        crc = zlib.crc32(data)
        b = put(put(b, lh + 14, "<I", crc), c + 16, "<I", crc)
    return b


def mutate_npz(b, rng, log):
    rec = zip_records(b)
    m = rng.randrange(22)
    pick = lambda xs: rng.choice(xs) if xs else None  # noqa: E731
    if m == 0:  # an inner .npy mutated, crcs fixed so it reaches the npy reader
        with zipfile.ZipFile(io.BytesIO(b)) as z:
            names = [n for n in z.namelist() if n.endswith(".npy")]
            contents = {n: z.read(n) for n in z.namelist()}
        if not names:
            return b
        n = rng.choice(names)
        sub = []
        contents[n] = mutate_npy(contents[n], rng, sub)
        log.append(f"entry {n}: " + "; ".join(sub))
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", rng.choice([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])) as z:
            for k, v in contents.items():
                z.writestr(k, v)
        return out.getvalue()
    if m == 1:  # central entry field changed
        c = pick(rec["central"])
        if c is None:
            return b
        off, fmt, v = rng.choice([(16, "<I", rng.getrandbits(32)), (20, "<I", rng.randint(0, 400)), (24, "<I", rng.randint(0, 400)),
                                  (10, "<H", rng.choice([0, 8, 12, 14, 99])), (42, "<I", rng.randint(0, 300)), (8, "<H", rng.choice([0, 1, 8, 0x800, 0x20, 0x40])),
                                  (6, "<B", rng.choice([20, 45, 63, 64, 99])), (34, "<H", 1)])
        log.append(f"central entry at {c}: +{off} = {v}")
        return put(b, c + off, fmt, v)
    if m == 2:  # local header field changed
        lh = pick(rec["local"])
        if lh is None:
            return b
        off, fmt, v = rng.choice([(14, "<I", rng.getrandbits(32)), (18, "<I", rng.randint(0, 400)), (22, "<I", rng.randint(0, 400)),
                                  (8, "<H", rng.choice([0, 8, 12])), (6, "<H", rng.choice([0, 8, 0x800])), (30, "<B", ord("b"))])
        log.append(f"local header at {lh}: +{off} = {v}")
        return put(b, lh + off, fmt, v)
    if m == 3:  # no central directory: local entries only
        c = min(rec["central"]) if rec["central"] else len(b)
        log.append("central directory and end record removed")
        return b[:c]
    if m == 4:
        e = pick(rec["end"])
        log.append("end record removed")
        return b[:e] if e is not None else b
    if m == 5:
        junk = bytes(rng.getrandbits(8) for _ in range(rng.choice([1, 16, 100])))
        log.append(f"{len(junk)} junk bytes prepended")
        return junk + b
    if m == 6:
        junk = rng.choice([b"x", b"PK\x05\x06", bytes(30)])
        log.append(f"{junk!r} appended")
        return b + junk
    if m == 7:  # an archive comment, its length right or wrong
        e = pick(rec["end"])
        if e is None:
            return b
        comment = rng.choice([b"hello", b"PK\x05\x06" + bytes(18), b""])
        n = len(comment) + rng.choice([0, 0, 1, -1])
        log.append(f"comment {comment!r}, length field {n}")
        return put(b, e + 20, "<H", max(0, n) & 0xFFFF) + comment
    if m == 8:  # duplicate name: a second central entry renamed like the first
        if len(rec["central"]) < 2:
            return b
        c0, c1 = rec["central"][0], rec["central"][1]
        n0 = struct.unpack("<H", b[c0 + 28:c0 + 30])[0]
        n1 = struct.unpack("<H", b[c1 + 28:c1 + 30])[0]
        if n0 != n1:
            return b
        log.append("second central name = first")
        return b[:c1 + 46] + b[c0 + 46:c0 + 46 + n0] + b[c1 + 46 + n1:]
    if m == 9:  # two central entries pointing at one local entry
        if len(rec["central"]) < 2:
            return b
        c0, c1 = rec["central"][0], rec["central"][1]
        log.append("central entry 1 offset = entry 0's")
        return put(b, c1 + 42, "<I", struct.unpack("<I", b[c0 + 42:c0 + 46])[0])
    if m == 10:  # the end record's count/size/offset
        e = pick(rec["end"])
        if e is None:
            return b
        off, fmt, v = rng.choice([(8, "<H", rng.randint(0, 5)), (10, "<H", rng.randint(0, 5)), (12, "<I", rng.randint(0, 300)), (16, "<I", rng.randint(0, 600)),
                                  (4, "<H", 1), (16, "<I", 0xFFFFFFFF)])
        log.append(f"end record +{off} = {v}")
        return put(b, e + off, fmt, v)
    if m == 11:  # a zip64 end record and locator inserted before the end record
        e = pick(rec["end"])
        if e is None:
            return b
        n, size, off = struct.unpack("<HII", b[e + 10:e + 20])
        r64 = struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, n + rng.choice([0, 0, 1]), n, size, off + rng.choice([0, 0, 0, 7]))
        loc = struct.pack("<IIQI", 0x07064B50, 0, e + rng.choice([0, 0, 0, 4]), 1)
        log.append("zip64 end record added")
        tail = b[e:]
        if rng.random() < 0.5:
            tail = put(tail, 16, "<I", 0xFFFFFFFF)
        return b[:e] + r64 + loc + tail
    if m in (12, 13):  # a name byte changed in the local header or the central record only
        where, at, name_at = ("local", pick(rec["local"]), 30) if m == 12 else ("central", pick(rec["central"]), 46)
        if at is None:
            return b
        i = at + name_at + rng.randint(0, 3)
        log.append(f"{where} name byte {i}")
        return put(b, i, "<B", rng.choice([ord("z"), 0, 0xE9, ord("/")]))
    if m == 14:  # both names changed alike
        c = pick(rec["central"])
        if c is None:
            return b
        off = struct.unpack("<I", b[c + 42:c + 46])[0]
        v = rng.choice([0, 0xE9, ord("/"), 0x7F])
        log.append(f"entry at {off}: name byte 0 = {v} in both headers")
        return put(put(b, c + 46, "<B", v), off + 30, "<B", v)
    if m == 15:  # stored data byte changed, crcs recomputed
        lh = pick(rec["local"])
        if lh is None:
            return b
        n, x = struct.unpack("<HH", b[lh + 26:lh + 30])
        i = lh + 30 + n + x + rng.randint(0, 20)
        log.append(f"data byte {i}, crcs fixed")
        return fix_crc(put(b, i, "<B", rng.getrandbits(8)))
    if m == 16:  # extra field in central or local
        c = pick(rec["central"])
        if c is None:
            return b
        n = struct.unpack("<H", b[c + 28:c + 30])[0]
        x = rng.choice([b"\x01\x00\x08\x00" + struct.pack("<Q", 5), b"\x55\x54\x05\x00\x01\x00\x00\x00\x00", b"\x01\x00", b"\x99\x99\x00\x00"])
        log.append(f"central extra {x!r}")
        b2 = put(b[:c + 46 + n] + x + b[c + 46 + n:], c + 30, "<H", struct.unpack("<H", b[c + 30:c + 32])[0] + len(x))
        e = b2.rfind(b"PK\x05\x06")
        return put(b2, e + 12, "<I", struct.unpack("<I", b2[e + 12:e + 16])[0] + len(x)) if e >= 0 else b2
    if m == 17:  # zip64 markers in a central entry with the values in an extra field
        c = pick(rec["central"])
        if c is None:
            return b
        n, xl = struct.unpack("<HH", b[c + 28:c + 32])
        csize, size = struct.unpack("<II", b[c + 20:c + 28])
        x = struct.pack("<HHQQ", 1, 16, size + rng.choice([0, 0, 1]), csize)
        b2 = put(put(b, c + 20, "<I", 0xFFFFFFFF), c + 24, "<I", 0xFFFFFFFF)
        b2 = put(b2[:c + 46 + n] + x + b2[c + 46 + n:], c + 30, "<H", xl + len(x))
        e = b2.rfind(b"PK\x05\x06")
        log.append("central sizes moved to a zip64 extra")
        return put(b2, e + 12, "<I", struct.unpack("<I", b2[e + 12:e + 16])[0] + len(x)) if e >= 0 else b2
    if m == 18:  # the data-descriptor flag set in both headers, or a descriptor edited
        d = pick(rec["desc"])
        if d is not None and rng.random() < 0.5:
            off = rng.choice([4, 8, 12])
            log.append(f"descriptor +{off}")
            return put(b, d + off, "<I", rng.getrandbits(16))
        c = pick(rec["central"])
        if c is None:
            return b
        off = struct.unpack("<I", b[c + 42:c + 46])[0]
        log.append("descriptor flag set in both headers")
        return put(put(b, c + 8, "<H", 8), off + 6, "<H", 8)
    if m == 19:
        cut = rng.randint(0, len(b))
        log.append(f"truncated at {cut}")
        return b[:cut]
    if m == 20:  # an entry removed from the central directory only
        if len(rec["central"]) < 2:
            return b
        c0, c1 = rec["central"][0], rec["central"][1]
        e = b.rfind(b"PK\x05\x06")
        log.append("central entry 0 removed")
        b2 = b[:c0] + b[c1:]
        e -= c1 - c0
        n, = struct.unpack("<H", b2[e + 10:e + 12])
        b2 = put(put(b2, e + 8, "<H", n - 1), e + 10, "<H", n - 1)
        return put(b2, e + 12, "<I", struct.unpack("<I", b2[e + 12:e + 16])[0] - (c1 - c0))
    i = rng.randrange(len(b))
    log.append(f"byte {i} flipped")
    return b[:i] + bytes([b[i] ^ (1 << rng.randrange(8))]) + b[i + 1:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--count", type=int, required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "read.jsonl"), "w") as f:
        for i in range(args.count):
            rng = random.Random(args.seed * 1_000_003 + i)
            npz = rng.random() < 0.5
            b = good_npz(rng) if npz else good_npy(rng)
            log = []
            for _ in range(rng.choice([0, 1, 1, 1, 2, 3])):
                try:
                    b = (mutate_npz if npz else mutate_npy)(b, rng, log)
                except Exception as e:  # noqa: BLE001 - a mutation that does not apply leaves the file as it is
                    log.append(f"(mutation skipped: {type(e).__name__})")
            name = f"{i}.{'npz' if npz else 'npy'}"
            path = os.path.join(args.out, name)
            with open(path, "wb") as g:
                g.write(b)
            line = {"file": name, "mutations": log, "numpy": numpy_reads(path)}
            if npz:
                line["zipfile"] = zipfile_reads(path)
            f.write(json.dumps(line) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

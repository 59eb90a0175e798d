#!/usr/bin/python3
"""One-file candidates (docs/formats.md section 9.5): a whole k3-candidate in ONE .safetensors or .npz.

Numpy only, for any engine with a Python side:

    import numpy as np, candidate_file
    arrays = {"layers.0.attn_in": np.asarray(x, "<f4"), ..., "logits": np.asarray(logits, "<f4"),
              "greedy_ids": np.asarray(ids, "<i4")}
    manifest = {"format": "k3-candidate", "format_version": 1,
                "engine": {"name": "my-port 0.3 (q4)", "precision": "int4"},
                "reference": {"manifest_sha256": sha256_of_the_reference_manifest_json_bytes, "dir": "reference-dumps/mini-k3-93"},
                "layer_inputs": "reference",
                "layers": [{"index": 0, "mixer": "kda", "mlp": "dense"}, ...]}
    candidate_file.write("my-port.safetensors", arrays, manifest)     # or "my-port.npz"

The manifest is the folder form's manifest.json WITHOUT "arrays": the file's own tensors are the arrays (F32 or I32,
names = the candidate keys). In a .safetensors file it is the text of the header's __metadata__ entry "manifest.json";
in a .npz it is the archive entry manifest.json, beside one <key>.npy per array.

    /usr/bin/python3 reference-dumps/candidate_file.py CANDIDATE_DIR OUT.safetensors|OUT.npz   # convert a folder candidate
"""
from __future__ import annotations

import io
import json
import os
import struct
import sys
import zipfile

import numpy as np

DTYPES = {np.dtype("<f4"): "F32", np.dtype("<i4"): "I32"}


def _checked(arrays, manifest):
    if "arrays" in manifest:
        raise ValueError("a one-file candidate's arrays are its tensors: leave 'arrays' out of the manifest")
    out = {}
    for key, a in arrays.items():
        a = np.ascontiguousarray(a)
        if a.dtype not in DTYPES:
            raise ValueError(f"{key}: dtype {a.dtype}; a candidate holds little-endian float32 or int32 only")
        out[key] = a
    return out


def write_safetensors(path, arrays, manifest):
    arrays = _checked(arrays, manifest)
    header, offset = {"__metadata__": {"manifest.json": json.dumps(manifest, separators=(",", ":"))}}, 0
    for key, a in arrays.items():
        header[key] = {"dtype": DTYPES[a.dtype], "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)  # the data section starts 8-aligned
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for a in arrays.values():
            f.write(a.tobytes())
    os.replace(tmp, path)


def write_npz(path, arrays, manifest):
    arrays = _checked(arrays, manifest)
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as z:
        z.writestr("manifest.json", json.dumps(manifest, indent=1))
        for key, a in arrays.items():
            b = io.BytesIO()
            np.lib.format.write_array(b, a, allow_pickle=False)
            z.writestr(key + ".npy", b.getvalue())
    os.replace(tmp, path)


def write(path, arrays, manifest):
    """Writes OUT.safetensors or OUT.npz (via a temporary file and a rename)."""
    if path.endswith(".safetensors"):
        write_safetensors(path, arrays, manifest)
    elif path.endswith(".npz"):
        write_npz(path, arrays, manifest)
    else:
        raise ValueError(f"{path}: a one-file candidate is .safetensors or .npz")


def from_folder(candidate_dir, path):
    """A folder candidate (manifest.json + raw arrays) as one file."""
    with open(os.path.join(candidate_dir, "manifest.json")) as f:
        m = json.load(f)
    arrays = {}
    for key, a in m.pop("arrays").items():
        dt = "<f4" if a["dtype"] == "F32" else "<i4"
        arrays[key] = np.fromfile(os.path.join(candidate_dir, a["file"]), dtype=dt).reshape(a["shape"])
    write(path, arrays, m)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    from_folder(sys.argv[1], sys.argv[2])

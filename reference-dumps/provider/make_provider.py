#!/usr/bin/env python3
"""Writes the provider-response fixtures: what an OpenAI-compatible API would have answered, with logprobs, for the
tiny oracle's reference ids, in both response shapes (chat: choices[0].logprobs.content[]; legacy completions:
choices[0].logprobs.tokens / token_logprobs / top_logprobs). Standard library only.

The "provider" computed its logprobs from one of three logit sets over reference-dumps/tiny-k3's ids:
  exact     the reference's own logits (float32 as stored)
  bf16      the same logits rounded to bfloat16 (round to nearest even), as a bf16 server would hold them
  misbound  the logits of a tiny-k3 copy with one misbound layer (layer 5: q_proj and k_proj swapped), from k3j's
            candidate dump of that copy (see --misbound and manifest.json "recipes")
the candidate they are graded against in the gates, reference.logits.npy (the reference's own logits), and two files
that must be refused: a NaN logprob (nan.chat.json) and a token whose bytes are no token of the
tokenizer (unmappable.chat.json).

    python3 reference-dumps/provider/make_provider.py --misbound /tmp/k3-misbound-cand/logits.bin
"""
import argparse
import base64
import hashlib
import json
import math
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DUMP = os.path.join(ROOT, "reference-dumps", "tiny-k3")
TOK = os.path.join(ROOT, "oracle-fixtures", "tiny-k3")
TOP = 5
MODEL = "kimi-k3"


def f32_rows(path, rows, vocab):
    with open(path, "rb") as f:
        b = f.read()
    if len(b) != 4 * rows * vocab:
        raise SystemExit(f"{path}: {len(b)} bytes, {rows} x {vocab} float32 expected")
    v = struct.unpack(f"<{rows * vocab}f", b)
    return [list(v[r * vocab:(r + 1) * vocab]) for r in range(rows)]


def bf16(x):
    """float32 x rounded to bfloat16, round to nearest even (NaN not expected here)."""
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", u))[0]


def log_softmax(row):
    m = max(row)
    lse = m + math.log(sum(math.exp(x - m) for x in row))
    return [x - lse for x in row]


def token_bytes():
    out = {}
    with open(os.path.join(TOK, "tiktoken.model")) as f:
        for line in f:
            b64, rank = line.split()
            out[int(rank)] = base64.b64decode(b64)
    with open(os.path.join(TOK, "tokenizer_config.json")) as f:
        for i, t in json.load(f)["added_tokens_decoder"].items():
            out[int(i)] = t["content"].encode()
    return out


def token_text(b):
    """The token's string as providers print it: its UTF-8 text, or 'bytes:\\xNN...' when the bytes are not UTF-8 on their own."""
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return "bytes:" + "".join(f"\\x{c:02x}" for c in b)


def top(lp, k):
    return sorted(range(len(lp)), key=lambda j: (-lp[j], j))[:k]


def chat(ids, rows, tb, prompt_len):
    content, text = [], b""
    for i, tok in enumerate(ids[prompt_len:]):
        lp = rows[prompt_len - 1 + i]
        content.append({"token": token_text(tb[tok]), "logprob": lp[tok], "bytes": list(tb[tok]),
                        "top_logprobs": [{"token": token_text(tb[j]), "logprob": lp[j], "bytes": list(tb[j])} for j in top(lp, TOP)]})
        text += tb[tok]
    return {"id": "chatcmpl-fixture", "object": "chat.completion", "created": 1764633600, "model": MODEL,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text.decode("utf-8", "replace")},
                         "logprobs": {"content": content, "refusal": None}, "finish_reason": "length"}],
            "usage": {"prompt_tokens": prompt_len, "completion_tokens": len(ids) - prompt_len, "total_tokens": len(ids)}}


def legacy(ids, rows, tb, prompt_len):
    tokens, lps, tops, offs, text = [], [], [], [], b""
    for i, tok in enumerate(ids[prompt_len:]):
        lp = rows[prompt_len - 1 + i]
        tokens.append(token_text(tb[tok]))
        lps.append(lp[tok])
        tops.append({token_text(tb[j]): lp[j] for j in top(lp, TOP)})
        offs.append(len(text))
        text += tb[tok]
    return {"id": "cmpl-fixture", "object": "text_completion", "created": 1764633600, "model": MODEL,
            "choices": [{"index": 0, "text": text.decode("utf-8", "replace"),
                         "logprobs": {"tokens": tokens, "token_logprobs": lps, "top_logprobs": tops, "text_offset": offs},
                         "finish_reason": "length"}],
            "usage": {"prompt_tokens": prompt_len, "completion_tokens": len(ids) - prompt_len, "total_tokens": len(ids)}}


def write(name, obj, files, allow_nan=False):
    path = os.path.join(HERE, name)
    text = json.dumps(obj, indent=1, allow_nan=allow_nan) + "\n"
    with open(path, "w") as f:
        f.write(text)
    files.append({"file": name, "size": len(text.encode()), "sha256": hashlib.sha256(text.encode()).hexdigest()})


def write_npy(name, rows, files):
    """The reference's logits as a candidate file: .npy '<f4' [T, V] (what a port's own dump of these ids would be)."""
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (len(rows), len(rows[0]))
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    data = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + b"".join(struct.pack(f"<{len(r)}f", *r) for r in rows)
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)
    files.append({"file": name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--misbound", required=True, help="float32 [T, V] logits of the misbound copy (its candidate dump's logits.bin)")
    a = ap.parse_args()
    with open(os.path.join(DUMP, "manifest.json")) as f:
        m = json.load(f)
    ids, prompt_len = m["ids"], len(m["prompt_ids"])
    t, v = m["arrays"]["logits"]["shape"]
    ref = f32_rows(os.path.join(DUMP, m["arrays"]["logits"]["file"]), t, v)
    sets = {"exact": ref, "bf16": [[bf16(x) for x in r] for r in ref], "misbound": f32_rows(a.misbound, t, v)}
    tb = token_bytes()
    files = []
    request = {"model": MODEL, "prompt": m["prompt_ids"], "max_tokens": len(ids) - prompt_len, "temperature": 0, "logprobs": TOP}
    write("request.completions.json", request, files)
    write_npy("reference.logits.npy", ref, files)
    for name, rows in sets.items():
        lps = [log_softmax(r) for r in rows]
        write(f"{name}.chat.json", chat(ids, lps, tb, prompt_len), files)
        write(f"{name}.completions.json", legacy(ids, lps, tb, prompt_len), files)
    lps = [log_softmax(r) for r in ref]
    bad = chat(ids, lps, tb, prompt_len)
    bad["choices"][0]["logprobs"]["content"][3]["logprob"] = float("nan")
    write("nan.chat.json", bad, files, allow_nan=True)
    bad = chat(ids, lps, tb, prompt_len)
    pos = bad["choices"][0]["logprobs"]["content"][4]
    for t in [pos] + [a for a in pos["top_logprobs"] if a["bytes"] == pos["bytes"]]:   # the chosen token and its own entry: one consistent, unmappable token
        t["token"], t["bytes"] = "ab", [97, 98]
    write("unmappable.chat.json", bad, files)
    manifest = {
        "fixture": "provider responses (OpenAI-compatible, with logprobs) for reference-dumps/tiny-k3's ids",
        "generator": "reference-dumps/provider/make_provider.py",
        "reference": "reference-dumps/tiny-k3", "prompt_ids": m["prompt_ids"], "completion_ids": ids[prompt_len:], "top_logprobs": TOP,
        "recipes": {
            "misbound": ["bin/k3 corrupt oracle-fixtures/tiny-k3 /tmp/k3-misbound --corruption swap:5:self_attn.q_proj.weight,self_attn.k_proj.weight",
                         "bin/k3 /tmp/k3-misbound --ids 250,17,101,3,199,64,128,42,7,230,88,155 --gen 1 --reference reference-dumps/tiny-k3 --dump-activations /tmp/k3-misbound-cand",
                         "python3 reference-dumps/provider/make_provider.py --misbound /tmp/k3-misbound-cand/logits.bin"]},
        # what the gates hold each file to (ProviderLogprobsGate); the defaults are compare-logits' own
        "tolerances": {"exact_max_abs_dlogprob": 1e-9, "bf16_min_mean_abs_dlogprob": 1e-4},
        "files": files,
    }
    with open(os.path.join(HERE, "manifest.json"), "w") as f:
        f.write(json.dumps(manifest, indent=1) + "\n")
    print(f"wrote {len(files)} files and manifest.json in {os.path.relpath(HERE, ROOT)}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes the tiny model's tokenizer: byte-level, fitting its 256-id vocabulary.

    python3 oracle-fixtures/tiny-k3/make_tokenizer.py [--check]

tiktoken.model holds the 250 single bytes 0x00..0xF9 as ranks 0..249 (rank = byte value) and no merges:
0xFA..0xFF never occur in well-formed UTF-8, so every text encodes, one id per byte. The six ids above
them are the K3 chat tokens at the same offsets from n_base as in the real tokenizer (n_base + 0..5):
250 [BOS], 251 [EOS], 252 <|end_of_msg|>, 253 <|open|>, 254 <|close|>, 255 <|sep|> — [BOS] and [EOS]
are the ids config.json names. The remaining reserved ids (256..505) lie above the model's vocabulary.
Their size and sha256 go to tokenizer.manifest.json (manifest.json belongs to make_tiny.py, and the
reference dump pins its bytes).
"""
import base64
import hashlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
N_BASE = 250
ADDED = [("[BOS]", True), ("[EOS]", True), ("<|end_of_msg|>", True), ("<|open|>", False), ("<|close|>", False), ("<|sep|>", False)]


def files():
    ranks = "".join(f"{base64.b64encode(bytes([b])).decode()} {b}\n" for b in range(N_BASE)).encode()
    cfg = {"added_tokens_decoder": {str(N_BASE + i): {"content": c, "special": s} for i, (c, s) in enumerate(ADDED)}}
    return {"tiktoken.model": ranks, "tokenizer_config.json": (json.dumps(cfg, indent=1) + "\n").encode()}


def main():
    out = files()
    if "--check" in sys.argv:
        bad = [n for n, b in out.items() if open(os.path.join(HERE, n), "rb").read() != b]
        sys.exit("differs: " + ", ".join(bad) if bad else 0)
    for n, b in out.items():
        with open(os.path.join(HERE, n), "wb") as f:
            f.write(b)
    manifest = {"fixture": "tiny-k3 tokenizer", "generator": "oracle-fixtures/tiny-k3/make_tokenizer.py", "n_base": N_BASE,
                "files": [{"file": n, "size": len(b), "sha256": hashlib.sha256(b).hexdigest()} for n, b in sorted(out.items())]}
    with open(os.path.join(HERE, "tokenizer.manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    print("wrote tiktoken.model, tokenizer_config.json and tokenizer.manifest.json")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes the tokenizer parity fixtures: expected ids from an independent oracle, tiktoken 0.14.0.

    pip install tiktoken==0.14.0
    python3 oracle-fixtures/tokenizer/make_fixtures.py [--jtokkit-jar PATH] [--check]

The vocabularies are the public o200k_base and cl100k_base rank files shipped inside the jtokkit jar
(Maven Central, com.knuddels:jtokkit:1.1.0; the gate reads the same files from the same jar and checks
their sha256 against this manifest). Each text is encoded four ways per vocabulary:
  own pattern, no added tokens        (tiktoken's own encoding of that vocabulary)
  Kimi pattern, added tokens off/on   (the Kimi split regex and the K3 added-token layout at n_base)
Text that is not well-formed UTF-8 cannot be given to tiktoken as a str; for it the ids come from the
same rank-BPE (tiktoken's _encode_single_piece) over pieces split by the `regex` module, each invalid
byte a unit of its own (Python's surrogateescape). The script checks that this second path agrees
with tiktoken.encode on every well-formed text before trusting it.

Writes cases.json, <vocab>.tokenizer_config.json and manifest.json (sha256 of each); --check
regenerates in memory and fails if any byte differs.
"""
import argparse
import base64
import glob
import hashlib
import json
import os
import sys
import zipfile

import regex
import tiktoken
from tiktoken_ext import openai_public

HERE = os.path.dirname(os.path.abspath(__file__))
JTOKKIT = "1.1.0"
VOCABS = {"o200k_base": openai_public.o200k_base, "cl100k_base": openai_public.cl100k_base}

KIMI_PATTERN = "|".join([
    r"""[\p{Han}]+""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])

# K3's added tokens, as offsets from n_base (the real file has n_base = 163584); the rest of the 256
# reserved ids are <|reserved_token_ID|>. <|open|>, <|close|>, <|sep|> are added but not special.
K3_ADDED = {0: ("[BOS]", True), 1: ("[EOS]", True), 2: ("<|end_of_msg|>", True), 3: ("<|open|>", False),
            4: ("<|close|>", False), 5: ("<|sep|>", False), 6: ("[start_header_id]", True),
            7: ("[end_header_id]", True), 9: ("[EOT]", True), 18: ("<|media_begin|>", True),
            19: ("<|media_content|>", True), 20: ("<|media_end|>", True), 21: ("<|media_pad|>", True),
            65: ("<osagent_mode>", True), 254: ("[UNK]", True), 255: ("[PAD]", True)}


def added_layout(n_base):
    out = {}
    for i in range(256):
        content, special = K3_ADDED.get(i, (f"<|reserved_token_{n_base + i}|>", True))
        out[n_base + i] = (content, special)
    return out


def texts():
    """(name, bytes). Every kind of text the tokenizer must split like the oracle."""
    t = [
        ("english", "The capital of France is Paris. It's what they'd said; we'll see, I'm sure."),
        ("contractions-upper", "IT'S THEY'D WE'LL I'M YOU'RE WE'VE DON'T SHE'S"),
        ("contractions-mixed", "It'S tHey'D We'Ll i'M You'rE we'VE dOn'T"),
        ("contraction-long-s", "it\u017f and IT\u017f and 'ſ"),
        ("digits", "1 12 123 1234 12345 123456789 3.14159 1,000,000 0x7fff 2026-12-01"),
        ("digits-other-scripts", "\u0661\u0662\u0663\u0664 \u0967\u0968\u0969 \u00bd \u2167 \u2460\u2461"),
        ("han", "中华人民共和国成立于1949年。我爱北京天安门，天安门上太阳升！"),
        ("han-mixed", "Kimi是一个大模型model，支持中文and English混合mixed输入。"),
        ("han-ext", "\U00020000\U0002A6DF\U00030000 \u3005\u3007 \u2E80\u2F00 \uF900"),
        ("japanese", "日本語のテキストです。カタカナとひらがな、そして漢字。ｶﾀｶﾅ半角"),
        ("korean", "한국어 텍스트입니다. 안녕하세요, 세계! 조합형 한"),
        ("cyrillic", "Съешь же ещё этих мягких французских булок, да выпей чаю. ЁЛКИ-ПАЛКИ"),
        ("arabic", "مرحبا بالعالم! هذا نص عربي مع أرقام ١٢٣ وتشكيل: العَرَبِيَّة"),
        ("devanagari", "नमस्ते दुनिया। यह हिन्दी पाठ है, संयुक्ताक्षर क्ष त्र ज्ञ।"),
        ("thai", "สวัสดีชาวโลก ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ"),
        ("greek-hebrew", "Καλημέρα κόσμε ΑΒΓ שלום עולם"),
        ("emoji-zwj", "family 👨\u200d👩\u200d👧\u200d👦 and 🏳\ufe0f\u200d🌈 flags 🇫🇷🇯🇵"),
        ("emoji-skin", "👍🏽 👋🏿 🧑🏻\u200d💻 ok👌"),
        ("combining", "e\u0301 a\u0300\u0300\u0300 Z\u0351\u0352\u0353\u0354 \u0301leading mark n\u0303o"),
        ("crlf", "line one\r\nline two\r\n\r\nline four\rold mac\n\nunix"),
        ("mixed-newlines", "a\n\r\n\r b \n  \n\t\n   end  \n"),
        ("tabs-trailing", "\tindented\t\ttabs   \n  trailing spaces   \n\t \t\n"),
        ("spaces-runs", "a  b   c    d\u00a0\u00a0e\u3000f\u2003g \u2028h\u2029i\u0085j"),
        ("whitespace-only", "   \n\n\t  "),
        ("source-java", "public static int[] encode(byte[] text) {\n    if (text == null) throw new NullPointerException(\"text\");\n    return a < b ? x : y; // i++ / --j\n}\n"),
        ("source-python", "def f(x):\n    return {'a': [1, 2], \"b\": x ** 2}  # comment\n\nclass A(B):\n\tpass\n"),
        ("json", "{\"role\":\"user\",\"content\":\"hi\\n\\u00e9\",\"n\":[1,2.5e-3,null,true],\"nested\":{\"k\":\"v\"}}"),
        ("url-path", "https://example.com/a/b?c=d&e=f#g ./src/main/java//k3j/ ~/x/y/"),
        ("punctuation", "!!! ??? ... --- *** ((())) [[[ ]]] {{{ }}} <<< >>> @@ ## $$ %% ^^ && || ;; :: ,,"),
        ("case-pairs", "camelCaseWord PascalCase snake_case SCREAMING_CASE xmlHTTPRequest iOS McDonald"),
        ("titlecase-letters", "\u01c5a \u01c8b \u01cbc \u1f88d"),
        ("specials-as-text", "<|open|>message role=\"user\"<|sep|>hi<|close|>message<|sep|><|end_of_msg|>[EOS][BOS]"),
        ("specials-each", " [BOS] [EOS] <|end_of_msg|> <|open|> <|close|> <|sep|> [start_header_id] [end_header_id] [EOT] "
         "<|media_begin|> <|media_content|> <|media_end|> <|media_pad|> <osagent_mode> [UNK] [PAD]"),
        ("specials-near-miss", "<|open| <|OPEN|> <| open |> [eos] <|end_of_msg|<|end_of_msg|>> <<|sep|>|>"),
        ("specials-adjacent", "<|open|><|close|><|sep|>[EOS][EOS]x<|sep|>"),
        ("long-word", "Pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism " * 3),
        ("long-spaces", " " * 70 + "x" + "\n" * 30 + "y"),
    ]
    out = [(name, s.encode("utf-8")) for name, s in t]
    out += [
        ("invalid-lone-continuation", b"ab\x80cd \xbf\xbf end"),
        ("invalid-truncated", b"caf\xc3 done \xe4\xb8 han \xf0\x9f\x98 emoji"),
        ("invalid-overlong", b"x\xc0\xaf y \xe0\x80\xaf z \xf0\x80\x80\xaf"),
        ("invalid-surrogate", b"s\xed\xa0\x80t \xed\xbf\xbf u"),
        ("invalid-high", b"\xf5\x80\x80\x80 \xf8\x88\x80\x80\x80 \xfe\xff end"),
        ("invalid-mixed", b"ok \xff\xfe<|open|>\x80 \xe4\xb8\xad\xe6 Hello\xc3World"),
        ("invalid-after-letters", b"hello\x80world \x80\x80\x80 123\x80456 \n\x80\n"),
    ]
    names = [n for n, _ in out]
    assert len(names) == len(set(names))
    return out


def jtokkit_jar(given):
    if given:
        return given
    home = os.path.expanduser("~/.m2/repository/com/knuddels/jtokkit")
    jar = os.path.join(home, JTOKKIT, f"jtokkit-{JTOKKIT}.jar")
    if not os.path.isfile(jar):
        sys.exit(f"no {jar}: run `ci/mvn dependency:get -Dartifact=com.knuddels:jtokkit:{JTOKKIT}` or pass --jtokkit-jar")
    return jar


def load_ranks(data):
    ranks = {}
    for line in data.decode("ascii").splitlines():
        if line:
            tok, r = line.split(" ")
            ranks[base64.b64decode(tok)] = int(r)
    return ranks


class Oracle:
    def __init__(self, name, ranks, pattern, n_base, added):
        self.pattern = pattern
        self.added = added                      # id -> content
        self.enc = tiktoken.Encoding(name=name, pat_str=pattern, mergeable_ranks=ranks,
                                     special_tokens={c: i for i, c in added.items()})
        # the regex module spells class intersection only in its VERSION1 syntax
        self.split = regex.compile(pattern, regex.V1 if "&&" in pattern else 0)
        self.by_bytes = sorted(((c.encode("utf-8"), i) for i, c in added.items()), key=lambda p: -len(p[0]))

    def tiktoken(self, data, with_added):
        text = data.decode("utf-8")
        return self.enc.encode(text, allowed_special="all") if with_added else self.enc.encode_ordinary(text)

    def pieces(self, data, with_added):
        """The second path: added tokens longest-first at the earliest position, then regex split + rank BPE."""
        out, chunk, i = [], 0, 0
        while with_added and i < len(data):
            hit = next(((b, tid) for b, tid in self.by_bytes if data.startswith(b, i)), None)
            if hit is None:
                i += 1
                continue
            out += self.ordinary(data[chunk:i])
            out.append(hit[1])
            i += len(hit[0])
            chunk = i
        return out + self.ordinary(data[chunk:])

    def ordinary(self, data):
        text = data.decode("utf-8", "surrogateescape")
        ids, end = [], 0
        for m in self.split.finditer(text):
            assert m.start() == end, f"gap in the split at {end}"
            ids += self.enc._encode_single_piece(m.group().encode("utf-8", "surrogateescape"))
            end = m.end()
        assert end == len(text)
        return ids

    def encode(self, data, with_added):
        second = self.pieces(data, with_added)
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return second, "regex+rank-bpe"
        first = self.tiktoken(data, with_added)
        if first != second:
            sys.exit(f"the two oracle paths disagree on a well-formed text (pattern {self.pattern[:30]}…)")
        return first, "tiktoken.encode"


def build(jar):
    files, vocabs, cases = {}, {}, []
    with zipfile.ZipFile(jar) as z:
        raw = {v: z.read(f"com/knuddels/jtokkit/{v}.tiktoken") for v in VOCABS}
    for vocab, ctor in VOCABS.items():
        ranks = load_ranks(raw[vocab])
        openai_public.load_tiktoken_bpe = lambda *_, **__: ranks   # tiktoken's own spec, fed the jar's ranks offline
        own = ctor()
        n_base = len(ranks)
        assert sorted(ranks.values()) == list(range(n_base))
        layout = added_layout(n_base)
        cfg = {"added_tokens_decoder": {str(i): {"content": c, "lstrip": False, "normalized": False, "rstrip": False,
                                                 "single_word": False, "special": s} for i, (c, s) in layout.items()}}
        cfg_name = f"{vocab}.tokenizer_config.json"
        files[cfg_name] = (json.dumps(cfg, indent=1, ensure_ascii=False) + "\n").encode("utf-8")
        vocabs[vocab] = {"ranks_resource": f"com/knuddels/jtokkit/{vocab}.tiktoken",
                         "ranks_sha256": hashlib.sha256(raw[vocab]).hexdigest(), "n_base": n_base,
                         "own_pattern": own["pat_str"], "tokenizer_config": cfg_name}
        oracles = {"own": Oracle(vocab + "-own", ranks, own["pat_str"], n_base, {}),
                   "kimi": Oracle(vocab + "-kimi", ranks, KIMI_PATTERN, n_base, {i: c for i, (c, _) in layout.items()})}
        for name, data in texts():
            for pattern, added in (("own", False), ("kimi", False), ("kimi", True)):
                ids, how = oracles[pattern].encode(data, added)
                cases.append({"name": f"{vocab}/{pattern}/{'added' if added else 'text'}/{name}", "vocab": vocab,
                              "pattern": pattern, "added_tokens": added, "oracle": how,
                              "bytes_b64": base64.b64encode(data).decode("ascii"), "ids": ids})
    files["cases.json"] = (json.dumps({"cases": cases}, separators=(",", ":")) + "\n").encode("utf-8")
    manifest = {"fixture": "tokenizer", "generator": "oracle-fixtures/tokenizer/make_fixtures.py",
                "oracle": f"tiktoken {tiktoken.__version__}", "vocabulary_source": f"com.knuddels:jtokkit:{JTOKKIT}",
                "kimi_pattern": KIMI_PATTERN, "vocabularies": vocabs, "files": file_list(files)}
    files["manifest.json"] = (json.dumps(manifest, indent=1, ensure_ascii=False) + "\n").encode("utf-8")
    return files, len(cases)


def file_list(files):
    """The manifest's list of the files written: name, size and sha256 of each, in name order."""
    return [{"file": n, "size": len(b), "sha256": hashlib.sha256(b).hexdigest()} for n, b in sorted(files.items())]


def check_or_write(here, files, check):
    """With check, exits naming every file in here that differs from its regeneration and returns True when
    none does; without, writes the files into here and returns False."""
    if check:
        bad = [f for f, b in files.items() if not os.path.isfile(os.path.join(here, f)) or open(os.path.join(here, f), "rb").read() != b]
        if bad:
            sys.exit("differs: " + ", ".join(bad))
        return True
    for f, b in files.items():
        with open(os.path.join(here, f), "wb") as out:
            out.write(b)
    return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jtokkit-jar")
    ap.add_argument("--check", action="store_true", help="regenerate in memory and compare with the files on disk")
    a = ap.parse_args()
    if tiktoken.__version__ != "0.14.0":
        sys.exit(f"tiktoken {tiktoken.__version__}: the fixtures are pinned to 0.14.0 (pip install tiktoken==0.14.0)")
    files, n = build(jtokkit_jar(a.jtokkit_jar))
    if check_or_write(HERE, files, a.check):
        print(f"{n} cases regenerate identically")
    else:
        print(f"wrote {n} cases and {len(files)} files to {HERE}")


if __name__ == "__main__":
    main()

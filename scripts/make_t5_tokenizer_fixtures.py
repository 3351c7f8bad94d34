#!/usr/bin/env python3
"""Parity fixtures for ditgen's T5 tokenizer (src/io/t5_tokenizer.h).

Trains two tiny SentencePiece unigram models with T5's conventions (pad 0,
eos 1, unk 2, no bos; NFKC normalisation, dummy prefix, extra whitespace
removed), one of them with byte_fallback, saves each as transformers'
T5Tokenizer directory (spiece.model + tokenizer_config.json +
special_tokens_map.json, as `save_pretrained` writes them), and records what
the slow, sentencepiece-based `T5Tokenizer` (transformers 4.x; 5.x replaced it
by a tokenizers-based class) gives for a few hundred prompts, called as
diffusers' PixArtAlphaPipeline / LattePipeline call it:

    tokenizer(prompts, padding="max_length", max_length=L, truncation=True,
              add_special_tokens=True)

for L in (16, 120), with legacy=True (what `from_pretrained` gives when the
config says nothing or `"legacy": true`) and legacy=False.

Output (tests/fixtures/t5_tokenizer/): <model>/ tokenizer dirs, prompts.json,
expected.json = {"cases": [{"tokenizer", "legacy", "max_length",
"ids": [[ids up to the mask's length] per prompt], "mask": ["0/1 string of
length L" per prompt]}]} (the <pad> ids after the mask are checked here, then
left out to keep the file small).

Run (outside the repository's tree for the venv; no torch needed):
    python3 -m venv /root/venv-t5
    /root/venv-t5/bin/pip install sentencepiece "transformers<5" protobuf
    /root/venv-t5/bin/python scripts/make_t5_tokenizer_fixtures.py
"""
import io
import json
import random
import shutil
import sys
from pathlib import Path

import sentencepiece as spm
import transformers
from transformers import T5Tokenizer

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "t5_tokenizer"
MAX_LENGTHS = (16, 120)

WORDS = ("a red circle moving left cat walking on the grass astronaut riding horse "
         "photo of sunset over mountains painting oil canvas high quality detailed "
         "city night lights rain reflections street dog running beach ocean waves "
         "blue green yellow purple small big old new tree forest river bird flying").split()
ACCENTS = "café naïve Zürich façade résumé jalapeño São Paulo Ærøskøbing crème brûlée piñata Ελλάδα".split()
CJK = ["中文字符", "日本語のテキスト", "한국어 문장", "猫が歩く", "红色的圆", "東京タワー", "桜の花"]
EMOJI = ["🙂", "🚀", "🐱", "🌅", "❤️", "👍🏽", "🎉"]
PUNCT = list(".,;:!?'\"()[]{}-–—…/\\@#$%^&*+=~`|")


def corpus(rng):
    lines = []
    for _ in range(3000):
        parts = []
        for _ in range(rng.randint(3, 14)):
            r = rng.random()
            if r < 0.55:
                parts.append(rng.choice(WORDS))
            elif r < 0.65:
                parts.append(rng.choice(ACCENTS))
            elif r < 0.73:
                parts.append(rng.choice(CJK))
            elif r < 0.78:
                parts.append(rng.choice(EMOJI))
            elif r < 0.88:
                parts.append(str(rng.randint(0, 99999)))
            else:
                parts.append(rng.choice(WORDS) + rng.choice(PUNCT))
        sep = rng.choice([" ", " ", " ", "  ", "     ", "\t", " \t  "])
        lines.append(sep.join(parts))
    return lines


def train(lines, byte_fallback):
    # The byte-fallback model uses the identity normaliser: NFKC's compiled
    # character map is ~240 KB per model file, and one copy (nfkc/) is enough
    # to check that the library applies it.
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=model, model_type="unigram",
        vocab_size=400 if byte_fallback else 500, character_coverage=0.995,
        pad_id=0, eos_id=1, unk_id=2, bos_id=-1,
        byte_fallback=byte_fallback, hard_vocab_limit=False,
        normalization_rule_name="identity" if byte_fallback else "nmt_nfkc", remove_extra_whitespaces=True,
        add_dummy_prefix=True, minloglevel=2, num_threads=1, seed_sentencepiece_size=20000)
    return model.getvalue()


def prompts(rng):
    fixed = [
        "", " ", "   ", "a", "hello", "Hello", "HELLO", "a red circle moving left",
        "a cat walking on the grass", "  leading spaces", "trailing spaces   ",
        "multiple     inner      spaces", "tab\tseparated\twords", "new\nline", "\n", "\t",
        "line one\n\nline three", "carriage\r\nreturn", "mixed \t \n whitespace",
        "café naïve Zürich", "中文字符", "日本語のテキスト and English", "한국어 문장 🙂",
        "emoji only 🚀🐱🌅", "👍🏽", "digits 0123456789 3.14159 1,000,000",
        "punctuation!!! ??? ... ,,, ;;; (parens) [brackets] {braces}",
        "<extra_id_3>", "a <extra_id_3> b", "a<extra_id_3>b", "a  <extra_id_3>  b",
        "<extra_id_0> start", "end <extra_id_99>", "<extra_id_100> is not a token",
        "<extra_id_1><extra_id_2>", "<extra_id_1> <extra_id_2>", "x\t<extra_id_5>\ny",
        "a\u3000<extra_id_7>\u00a0b", "</s>", "ends with eos </s>", "eos </s> in the middle",
        "</s></s>", "<pad> pad token", "<unk> unk token", "<extra_id_3", "extra_id_3>",
        "<<extra_id_3>>", "<s> not a T5 token", "\u2581underline\u2581char", "\u2581",
        "fullwidth ＡＢＣ１２３", "ligature ﬁ ﬂ", "e\u0301 combining", "ℌ𝔢𝔩𝔩𝔬 math letters",
        "unseen: Ω Ж ש ह ก 🦄 ☃ ∑", "zero\u200bwidth", "nbsp\u00a0space", "ideographic\u3000space",
        "ALL CAPS SENTENCE", "x" * 300, "🚀" * 40, "中" * 150,
        " ".join(WORDS) * 3, ("a photo of a cat " * 40).strip(),
    ]
    fragments = WORDS + ACCENTS + CJK + EMOJI + PUNCT + [
        "<extra_id_3>", "<extra_id_42>", "</s>", "<pad>", "Ω", "🦄", "\u2581", "123", "4.5",
        "\u3000", "\u00a0", "ＡＢ", "ﬁ"]
    seps = [" ", " ", " ", "", "  ", "    ", "\t", "\n", " \n ", "\u3000"]
    out = list(fixed)
    while len(out) < 340:
        n = rng.choice([1, 2, 3, 5, 8, 13, 21, 40, 70])
        text = ""
        for i in range(n):
            text += rng.choice(fragments)
            if i < n - 1:
                text += rng.choice(seps)
        if rng.random() < 0.2:
            text = rng.choice(seps) + text
        if rng.random() < 0.2:
            text = text + rng.choice(seps)
        out.append(text)
    return out


def main():
    major = int(transformers.__version__.split(".")[0])
    if major >= 5:
        sys.exit("transformers %s: T5Tokenizer is not the sentencepiece one; install 'transformers<5'" %
                 transformers.__version__)
    rng = random.Random(20240614)
    lines = corpus(rng)
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    all_prompts = prompts(rng)
    cases = []
    for name, byte_fallback in (("nfkc", False), ("bytefb", True)):
        model_path = OUT / (name + ".model.tmp")
        model_path.write_bytes(train(lines, byte_fallback))
        # Saved as a pipeline's tokenizer/ folder is: T5Tokenizer.save_pretrained.
        T5Tokenizer(vocab_file=str(model_path), legacy=None).save_pretrained(str(OUT / name))
        model_path.unlink()
        for legacy in (True, False):
            tok = T5Tokenizer.from_pretrained(str(OUT / name), legacy=legacy)
            assert tok.legacy == legacy
            for max_length in MAX_LENGTHS:
                enc = tok(all_prompts, padding="max_length", max_length=max_length, truncation=True,
                          add_special_tokens=True)
                ids = enc["input_ids"]
                masks = enc["attention_mask"]
                # Stored: the mask in full (a 0/1 string) and the ids up to the
                # mask's length; the padding beyond it is checked here to be
                # all <pad> (0) and the tests pad back to max_length.
                real = []
                for row, mask in zip(ids, masks):
                    n = sum(mask)
                    assert len(row) == max_length and mask == [1] * n + [0] * (max_length - n)
                    assert all(i == tok.pad_token_id == 0 for i in row[n:])
                    real.append(row[:n])
                cases.append({"tokenizer": name, "legacy": legacy, "max_length": max_length, "ids": real,
                              "mask": ["".join(str(m) for m in row) for row in masks]})
    # What from_pretrained reads when nothing is said (the published
    # checkpoints' case): recorded so the C++ default is checked against it.
    default_legacy = T5Tokenizer.from_pretrained(str(OUT / "nfkc")).legacy
    (OUT / "prompts.json").write_text(json.dumps(all_prompts, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    with open(OUT / "expected.json", "w", encoding="utf-8") as f:
        json.dump({"transformers": transformers.__version__, "sentencepiece": spm.__version__,
                   "default_legacy": default_legacy, "cases": cases}, f, separators=(",", ":"))
        f.write("\n")
    total = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    print(f"{len(all_prompts)} prompts, {len(cases)} cases, {total} bytes in {OUT}")


if __name__ == "__main__":
    main()

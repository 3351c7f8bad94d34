#!/usr/bin/env python3
"""Parity fixtures for ditgen's T5 text encoder (`ditgen encode`, DESIGN.md §1, §6).

Builds three tiny random text encoders with transformers' own classes, saves
each as a bare `text_encoder/` + `tokenizer/` pair (no model_index.json), and
records what transformers gives for a few prompts fed as diffusers'
PixArtAlphaPipeline / LattePipeline feed them with clean_caption=False:

    texts = [t.lower().strip() for t in prompts]
    enc = tokenizer(texts, padding="max_length", max_length=24, truncation=True,
                    add_special_tokens=True, return_tensors="pt")
    model(enc.input_ids, attention_mask=enc.attention_mask).last_hidden_state

Models (d_model 40, d_kv 8, 5 heads, d_ff 72, 32 buckets, eps 1e-6; the
tokenizer is a copy of tests/fixtures/t5_tokenizer/bytefb, 500 tokens with the
100 <extra_id_k>):

- t5_relu:  T5EncoderModel, v1.0 `relu` feed-forward, 3 layers, max_distance
  20, vocab 504; float32, one `model.safetensors` (holds `shared.weight`).
- t5_gated: T5EncoderModel, v1.1 `gated-gelu` (gelu_new), 2 layers,
  max_distance 128, vocab 500; float16, sharded variant
  `model.fp16-0000{1,2}-of-00002.safetensors` + `model.safetensors.index.fp16.json`,
  rewritten to hold `encoder.embed_tokens.weight` instead of `shared.weight`.
- umt5:     UMT5EncoderModel, `gated-gelu`, 3 layers, max_distance 128 and a
  relative_attention_bias in every layer, vocab 512; bfloat16, one
  `model.safetensors` (holds `shared.weight`).

References (`<model>/expected.safetensors`): `ids`, `mask` (int64 [N, 24]),
`embeds_f32` (float32 [N, 24, 40]: the stored weights widened to float32, read
back with `from_pretrained(..., torch_dtype=float32)`, computed in float32 on
one thread) and `embeds_bf16` (float32 [N, 24, 40]: that model after
`.to(torch.bfloat16)`, every module in bfloat16, output cast to float32). The
padded positions are included: they are what the pipelines pass on.

Also written: prompts.json (the raw prompts), case.json (versions, shapes,
files, bf16-vs-f32 relL2 per model), position_buckets.json (the bidirectional
bucket of every relative position -700..700 by T5Attention's static method
and by UMT5Attention's instance method, for a few (num_buckets, max_distance))
and prompt_preprocess.json (`s.lower().strip()` for ~100 Unicode strings).

Run (the venv of make_t5_tokenizer_fixtures.py plus torch and safetensors;
transformers 4.x, whose T5Tokenizer is the sentencepiece one):
    /root/venv-t5/bin/python scripts/make_t5_encoder_fixtures.py
It deletes and rewrites tests/fixtures/t5_encoder/ only, runs in seconds on a
CPU and is deterministic (fixed seeds, one thread): two runs give identical
files. `--glibc` also prints which code points of prompt_preprocess.json
Python lower-cases differently from glibc's towlower in C.UTF-8 (information
for the C++ side; nothing is written).
"""
import copy
import ctypes
import json
import math
import shutil
import sys
from pathlib import Path

import safetensors
import sentencepiece
import torch
import transformers
from safetensors.torch import load_file, save_file
from transformers import T5Config, T5EncoderModel, T5Tokenizer, UMT5Config, UMT5EncoderModel
from transformers.models.t5.modeling_t5 import T5Attention
from transformers.models.umt5.modeling_umt5 import UMT5Attention

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "t5_encoder"
TOKENIZER = ROOT / "tests" / "fixtures" / "t5_tokenizer" / "bytefb"
MAX_LENGTH = 24

PROMPTS = [
    "",
    "cat",
    "  A Red CIRCLE Moving LEFT.  \n",
    "\t A CAT Walking  ",
    "a photo of an astronaut riding a white horse on the moon while the earth rises over the horizon, "
    "highly detailed oil painting, dramatic light",
    "cat, 3.14! (ok)? #42",
    "Café ZÜRICH à São",
    "中文字符 日本語のテキスト 한국어",
    "emoji 🚀🐱 🙂 👍🏽 ❤️",
    "ΟΔΟΣ İstanbul ẞ",
]

COMMON = dict(d_model=40, d_kv=8, num_heads=5, d_ff=72, relative_attention_num_buckets=32,
              layer_norm_epsilon=1e-6, dropout_rate=0.0)

# name: (class, config class, config extras, vocab, stored dtype, save_pretrained kwargs, seed)
MODELS = {
    "t5_relu": (T5EncoderModel, T5Config,
                dict(feed_forward_proj="relu", num_layers=3, relative_attention_max_distance=20),
                504, torch.float32, {}, 101),
    "t5_gated": (T5EncoderModel, T5Config,
                 dict(feed_forward_proj="gated-gelu", num_layers=2, relative_attention_max_distance=128),
                 500, torch.float16, dict(variant="fp16", max_shard_size="60KB"), 202),
    "umt5": (UMT5EncoderModel, UMT5Config,
             dict(feed_forward_proj="gated-gelu", num_layers=3, relative_attention_max_distance=128),
             512, torch.bfloat16, {}, 303),
}

BUCKET_CASES = [(32, 128), (32, 20), (8, 20), (16, 64), (32, 16)]
BUCKET_FIRST, BUCKET_LAST = -700, 700

# Every character Python's str.strip() removes (str.isspace(), Unicode 14),
# and some it keeps.
PY_SPACES = ("\t\n\v\f\r\x1c\x1d\x1e\x1f \x85\xa0\u1680" + "".join(chr(c) for c in range(0x2000, 0x200B)) +
             "\u2028\u2029\u202f\u205f\u3000")
NOT_SPACES = "\u200b\ufeff\u180e\u2060"

CASE_STRINGS = [
    # ASCII
    "", "Hello World", "ALL CAPS SENTENCE", "MiXeD cAsE 123 !?", "already lower", "  padded ASCII  ",
    # Latin-1, Latin Extended-A/B, letterlike symbols
    "ÀÁÂÃÄÅÆÇÈÉÊËÌÍÎÏ", "ÐÑÒÓÔÕÖØÙÚÛÜÝÞ ß ÿ µ", "ĀĂĄĆĈĊČĎĐĒĔĖĘĚĜĞĠĢĤĦĨĪĬĮ", "ĲĴĶĹĻĽĿŁŃŅŇŊŌŎŐŒŔŖŘŚŜŞŠŢŤŦŨŪŬŮŰŲŴŶŸŹŻŽ",
    "ƁƂƄƆƇƉƊƋƎƏƐƑƓƔƖƗƘƜƝƟƠƢƤƧƩƬƮƯƱƲƳƵƷƸƼ", "ǍǏǑǓǕǗǙǛǞǠǢǤǦǨǪǬǮ ȀȂȄȆ Ⱥ Ƚ Ⱦ Ɂ Ƀ Ʉ Ʌ Ɇ",
    "K Å Ω (Kelvin, Angstrom, Ohm signs)", "ẞ (capital sharp s)", "ḀḂḄ ẠẢẤ ỲỴỶỸ",
    # Greek, final sigma
    "ΟΔΟΣ", "ΣΑΣ ΣΑΣ", "Σ", "AΣ b", "ΑΣ", "ΣΑ", "ΑΣΑ", "ΑΣ.", "Α\u0301Σ", "ΑΣ\u0301", "ΑΣ'Α", "ΣΣ",
    "ΑΒΓΔΕΖΗΘΙΚΛΜΝΞΟΠΡΣΤΥΦΧΨΩ", "ΆΈΉΊΌΎΏ Ϊ Ϋ", "ϴ ϷϺϽϾϿ",
    # Turkish dotted capital I
    "İ", "İstanbul", "DİYARBAKIR ı", "Iİ",
    # Cyrillic, Armenian, Georgian
    "ПРИВЕТ МИР", "ЀЁЂЃЄЅІЇЈЉЊЋЌЍЎЏ", "ѠѢѤ Ґ Ӂ Ӏ Ԁ Ꙁ", "ԲԱՐԵՎ ՁԵԶ", "ႠႡႢ ჇჍ",
    "ᲒᲐᲛᲐᲠᲯᲝᲑᲐ ᲽᲾᲿ",
    # Fullwidth, Roman numerals, circled letters
    "ＡＢＣ ＸＹＺ ａｂｃ", "Ⅻ Ⅰ Ⅴ ⅹ", "Ⓐ Ⓑ Ⓩ ⓐ",
    # Cherokee, Glagolitic, Coptic, Latin Extended-C/D
    "ᎠᎡᎢ ᏰᏱ ꭰ", "ⰀⰁⰂ", "ⲀⲂⲄ", "Ɫ Ᵽ Ɽ Ɑ Ɱ Ɐ Ɒ Ȿ Ɀ", "Ꜣ Ꝺ Ᵹ Ꞌ Ɥ Ɦ Ɜ Ɡ Ɬ Ɪ Ʞ Ʇ Ʝ Ꭓ Ꞵ Ꟑ",
    # Astral: Deseret, Osage, Old Hungarian, Warang Citi, Medefaidrin, Adlam, Vithkuqi
    "𐐀𐐁𐐂 𐐨", "𐒰𐒱", "𐲀𐲁", "𑢠𑢡", "𖹀𖹁", "𞤀𞤁", "𐕰𐕱",
    # Title-case digraphs and no-case letters
    "ǅ ǈ ǋ ǲ Ǆ Ǉ Ǌ Ǳ", "𝐀𝐁 ℌ ℍ ẞ", "中文 ＡB 한국어 🙂",
]


def _whitespace_cases():
    out = []
    for c in PY_SPACES:
        out.append(c + "Ab" + c + "Cd" + c)
    for c in NOT_SPACES:
        out.append(c + "Ab" + c + "Cd" + c)
        out.append(" " + c + " Ab " + c + " ")
    out += [PY_SPACES + "X" + PY_SPACES, PY_SPACES, " \u3000\xa0\t\n ", "\u200b\u3000X\u3000\u200b",
            "\u3000\u200bX\u200b\u3000", "\tA Σ\u3000"]
    return out


def rel_l2(a, b):
    return float(torch.linalg.vector_norm((a - b).double()) / torch.linalg.vector_norm(b.double()))


def tokenize(tok, prompts):
    texts = [t.lower().strip() for t in prompts]
    enc = tok(texts, padding="max_length", max_length=MAX_LENGTH, truncation=True, add_special_tokens=True,
              return_tensors="pt")
    return enc.input_ids.to(torch.int64), enc.attention_mask.to(torch.int64)


@torch.no_grad()
def build(name, tok):
    cls, cfg_cls, extras, vocab, dtype, save_kwargs, seed = MODELS[name]
    torch.manual_seed(seed)
    cfg = cfg_cls(vocab_size=vocab, **COMMON, **extras)
    model = cls(cfg).eval()
    te = OUT / name / "text_encoder"
    model.to(dtype).save_pretrained(str(te), safe_serialization=True, **save_kwargs)
    shutil.copytree(TOKENIZER, OUT / name / "tokenizer")

    # The weight files as written, then the embedding name wanted.
    files = sorted(p.name for p in te.iterdir() if p.name != "config.json")
    if name == "t5_gated":
        assert files == ["model.fp16-00001-of-00002.safetensors", "model.fp16-00002-of-00002.safetensors",
                         "model.safetensors.index.fp16.json"], files
        index_path = te / "model.safetensors.index.fp16.json"
        index = json.loads(index_path.read_text())
        shard = index["weight_map"].pop("shared.weight")
        assert "encoder.embed_tokens.weight" not in index["weight_map"]
        index["weight_map"]["encoder.embed_tokens.weight"] = shard
        index["weight_map"] = dict(sorted(index["weight_map"].items()))
        index_path.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
        tensors = load_file(str(te / shard))
        tensors["encoder.embed_tokens.weight"] = tensors.pop("shared.weight")
        save_file(tensors, str(te / shard), metadata={"format": "pt"})
    else:
        assert files == ["model.safetensors"], files
    stored = {}
    for f in files:
        if f.endswith(".safetensors"):
            stored.update(load_file(str(te / f)))
    assert all(t.dtype == dtype for t in stored.values())
    emb_names = sorted(k for k in stored if k in ("shared.weight", "encoder.embed_tokens.weight"))
    assert len(emb_names) == 1, emb_names

    # float32 reference model: the stored weights widened, read by transformers.
    ref = cls.from_pretrained(str(te), dtype=torch.float32, **({"variant": "fp16"} if "variant" in save_kwargs else {}))
    ref.eval()
    state = ref.state_dict()
    for k, t in stored.items():
        assert torch.equal(state[k], t.float()), k
    assert torch.equal(state["shared.weight"], state["encoder.embed_tokens.weight"])
    assert all(v.dtype == torch.float32 for v in state.values())

    ids, mask = tokenize(tok, PROMPTS)
    f32 = ref(input_ids=ids, attention_mask=mask).last_hidden_state.float()
    bf = copy.deepcopy(ref).to(torch.bfloat16)
    bf16 = bf(input_ids=ids, attention_mask=mask).last_hidden_state.float()
    assert f32.shape == (len(PROMPTS), MAX_LENGTH, cfg.d_model)
    for t in (f32, bf16):
        assert torch.isfinite(t).all()
        # not degenerate: tokens and prompts differ
        assert t.std(dim=1).min() > 1e-3 and t.std(dim=0).min() > 1e-4
        assert t.abs().mean() > 1e-3
    # a rerun in float32 gives the same bits
    assert torch.equal(f32, ref(input_ids=ids, attention_mask=mask).last_hidden_state)
    save_file({"ids": ids.contiguous(), "mask": mask.contiguous(), "embeds_f32": f32.contiguous(),
               "embeds_bf16": bf16.contiguous()}, str(OUT / name / "expected.safetensors"),
              metadata={"format": "pt"})
    valid = mask.bool()
    info = {
        "class": cls.__name__, "stored_dtype": str(dtype).removeprefix("torch."), "vocab_size": vocab,
        "num_layers": cfg.num_layers, "feed_forward_proj": cfg.feed_forward_proj,
        "relative_attention_max_distance": cfg.relative_attention_max_distance,
        "weight_files": files, "embedding_tensor": emb_names[0],
        "rel_l2_bf16_vs_f32": round(rel_l2(bf16, f32), 6),
        "rel_l2_bf16_vs_f32_unpadded": round(rel_l2(bf16[valid], f32[valid]), 6),
        "max_abs_f32": round(float(f32.abs().max()), 4),
    }
    print(f"{name}: {files}, embedding {emb_names[0]}, relL2(bf16, f32) = {info['rel_l2_bf16_vs_f32']:.3e} "
          f"(unpadded positions {info['rel_l2_bf16_vs_f32_unpadded']:.3e})")
    return info, ids, mask


def position_buckets():
    rel = torch.arange(BUCKET_FIRST, BUCKET_LAST + 1, dtype=torch.long)
    cases, differ = [], []
    for nb, md in BUCKET_CASES:
        t5 = T5Attention._relative_position_bucket(rel, bidirectional=True, num_buckets=nb, max_distance=md)
        cfg = UMT5Config(d_model=8, d_kv=4, num_heads=2, relative_attention_num_buckets=nb,
                         relative_attention_max_distance=md, is_decoder=False)
        att = UMT5Attention(cfg, has_relative_attention_bias=True, layer_idx=0)
        assert not att.is_decoder
        umt5 = att._relative_position_bucket(rel)
        t5l, umt5l = t5.tolist(), umt5.tolist()
        assert min(t5l) >= 0 and max(t5l) < nb
        if t5l != umt5l:
            differ.append((nb, md, [BUCKET_FIRST + i for i, (a, b) in enumerate(zip(t5l, umt5l)) if a != b]))
        cases.append({"num_buckets": nb, "max_distance": md, "first": BUCKET_FIRST, "t5": t5l, "umt5": umt5l})
    print("position buckets: T5 and UMT5 " + (f"DIFFER at {differ}" if differ else "agree everywhere"))
    return {"bidirectional": True, "t5_umt5_differ": bool(differ), "cases": cases}


def prompt_preprocess():
    assert "".join(c for c in map(chr, range(0x110000)) if c.isspace()) == PY_SPACES
    assert not any(c.isspace() for c in NOT_SPACES)
    strings = CASE_STRINGS + _whitespace_cases()
    assert len(set(strings)) == len(strings)
    return {"python": sys.version.split()[0], "unicode": __import__("unicodedata").unidata_version,
            "rule": "processed = raw.lower().strip()",
            "cases": [{"raw": s, "processed": s.lower().strip()} for s in strings]}


def glibc_report(cases):
    libc = ctypes.CDLL("libc.so.6")
    libc.setlocale.restype = ctypes.c_char_p
    if not libc.setlocale(0, b"C.UTF-8"):  # LC_CTYPE
        sys.exit("no C.UTF-8 locale")
    libc.towlower.restype = ctypes.c_uint32
    libc.towlower.argtypes = [ctypes.c_uint32]
    libc.iswspace.argtypes = [ctypes.c_uint32]
    cps = sorted({ord(c) for case in cases for c in case["raw"]})
    diff = []
    for cp in cps:
        py, gl = chr(cp).lower(), chr(libc.towlower(cp))
        if py != gl:
            diff.append(f"U+{cp:04X} {chr(cp)!r}: python {py!r} ({' '.join(f'U+{ord(c):04X}' for c in py)}) "
                        f"glibc {gl!r} (U+{ord(gl):04X})")
    print(f"glibc towlower vs python lower, {len(cps)} code points of prompt_preprocess.json, "
          f"{len(diff)} differ (context-free; Greek final sigma is contextual in Python):")
    for d in diff:
        print("  " + d)
    full = [cp for cp in range(0x110000) if not 0xD800 <= cp < 0xE000
            and chr(cp).lower() != chr(libc.towlower(cp))]
    print(f"all code points: {len(full)} differ: " + " ".join(f"U+{cp:04X}" for cp in full))
    sp = [cp for cp in range(0x110000) if not 0xD800 <= cp < 0xE000
          and chr(cp).isspace() != bool(libc.iswspace(cp))]
    print("isspace vs iswspace differ at: " + " ".join(f"U+{cp:04X}({'py' if chr(cp).isspace() else 'glibc'})"
                                                      for cp in sp))
    # Final sigma: what towlower per code point would give instead.
    ctx = [c["raw"] for c in cases if "".join(chr(libc.towlower(ord(ch))) for ch in c["raw"]).strip() !=
           c["processed"]]
    print(f"{len(ctx)} strings where per-code-point towlower + strip differs from lower().strip(): "
          + " | ".join(repr(s) for s in ctx))


def main():
    major = int(transformers.__version__.split(".")[0])
    if major >= 5:
        sys.exit("transformers %s: T5Tokenizer is not the sentencepiece one; install 'transformers<5'" %
                 transformers.__version__)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    tok = T5Tokenizer.from_pretrained(str(TOKENIZER))
    assert len(tok) == 500 and tok.pad_token_id == 0 and tok.eos_token_id == 1
    models, ids0 = {}, None
    for name in MODELS:
        models[name], ids, mask = build(name, tok)
        # Every model reads the same tokenizer copy, so the same ids.
        if ids0 is None:
            ids0 = (ids, mask)
            lengths = mask.sum(1).tolist()
            assert lengths[0] == 1 and lengths[4] == MAX_LENGTH and ids[4, -1] == 1, lengths
            assert lengths.count(MAX_LENGTH) == 1, lengths
            print(f"tokenizer: {len(tok)} tokens; prompt lengths {lengths}")
        else:
            assert torch.equal(ids, ids0[0]) and torch.equal(mask, ids0[1])
    (OUT / "prompts.json").write_text(json.dumps(PROMPTS, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    case = {
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "safetensors": safetensors.__version__, "sentencepiece": sentencepiece.__version__},
        "max_length": MAX_LENGTH, "tokenizer_len": len(tok), "preprocess": "text.lower().strip()",
        "tokenizer_call": "tokenizer(texts, padding='max_length', max_length=24, truncation=True, "
                          "add_special_tokens=True)",
        "models": models,
    }
    (OUT / "case.json").write_text(json.dumps(case, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    with open(OUT / "position_buckets.json", "w", encoding="utf-8") as f:
        json.dump(position_buckets(), f, separators=(",", ":"))
        f.write("\n")
    pp = prompt_preprocess()
    (OUT / "prompt_preprocess.json").write_text(json.dumps(pp, ensure_ascii=False, indent=0) + "\n",
                                                encoding="utf-8")
    if "--glibc" in sys.argv[1:]:
        glibc_report(pp["cases"])
    total = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    print(f"{len(PROMPTS)} prompts, {len(pp['cases'])} preprocess cases, {total} bytes in {OUT}")


if __name__ == "__main__":
    main()

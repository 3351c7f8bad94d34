#!/usr/bin/env python3
"""Full-size random T5-XXL text encoders for benchmarking `ditgen encode`.

Writes two model directories with random weights of the shape of
google/t5-v1_1-xxl's encoder (T5EncoderModel: vocab 32128, d_model 4096,
d_kv 64, 64 heads, d_ff 10240, 24 layers, gated-gelu, 32 buckets, max
distance 128, eps 1e-6; 4.76 B parameters):

    OUTDIR/t5xxl-bf16/text_encoder/  config.json, model-0000k-of-0000n.safetensors
                                     (shards of <= 5 GB) + model.safetensors.index.json,
                                     stored bfloat16 (~9.5 GB)
    OUTDIR/t5xxl-f32/text_encoder/   the same weights widened to float32 (~19 GB),
                                     sharded the same way (<= 5 GB a shard)
    OUTDIR/<dir>/tokenizer/          a copy of tests/fixtures/t5_tokenizer/nfkc/
                                     (a small trained sentencepiece T5Tokenizer; its
                                     600 ids fit in the 32128 embedding rows)

Memory: the model is built with torch.set_default_dtype(torch.bfloat16), so its
parameters are created in bfloat16 (~9.5 GB resident; never the 19 GB float32
model). The weights use transformers' default T5 initialisation; a short
forward pass checks that the output is finite. The bfloat16 directory is
written with save_pretrained(max_shard_size="5GB", safe_serialization=True);
the model is then freed and the float32 copy is streamed from the bfloat16
shards (memory-mapped) by a small safetensors writer here: one tensor at a
time is read, widened with .float() and written, so the float32 pass needs
one tensor's worth of memory.

Idempotent: a directory whose index and shards (and tokenizer) already exist
is left alone; each text_encoder/ is written to a temporary sibling and renamed
into place when complete, so an interrupted run leaves no half directory.

Run in the reference Python environment, scripts/requirements.txt (torch,
transformers 4.x, safetensors, sentencepiece):
    python3 -m venv /root/venv-ditgen && /root/venv-ditgen/bin/pip install -r scripts/requirements.txt
    /root/venv-ditgen/bin/python scripts/models/make_t5_xxl_random.py OUTDIR [--seed N] [--bf16-only]
Needs ~29 GB of free disk and ~11 GB of free memory; a few minutes on 2 cores.
"""
import argparse
import gc
import json
import math
import os
import re
import shutil
import struct
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOKENIZER = ROOT / "tests" / "fixtures" / "t5_tokenizer" / "nfkc"
INDEX_NAME = "model.safetensors.index.json"
MAX_SHARD_SIZE = "5GB"  # save_pretrained's max_shard_size
MAX_SHARD_BYTES = 5 * 10**9  # the same, for the float32 shards

T5_XXL = dict(vocab_size=32128, d_model=4096, d_kv=64, d_ff=10240, num_layers=24, num_heads=64,
              relative_attention_num_buckets=32, relative_attention_max_distance=128,
              feed_forward_proj="gated-gelu", layer_norm_epsilon=1e-6, tie_word_embeddings=False)


def gb(n):
    return "%.2f GB" % (n / 1e9)


def dir_bytes(path):
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def encoder_complete(enc_dir):
    """text_encoder/ holds config.json, the index and every shard it names."""
    enc_dir = Path(enc_dir)
    index = enc_dir / INDEX_NAME
    if not (enc_dir / "config.json").is_file() or not index.is_file():
        return False
    try:
        files = set(json.loads(index.read_text())["weight_map"].values())
    except (ValueError, KeyError):
        return False
    return bool(files) and all((enc_dir / f).is_file() for f in files)


def copy_tokenizer(model_dir):
    dst = Path(model_dir) / "tokenizer"
    if (dst / "spiece.model").is_file():
        return
    tmp = Path(model_dir) / "tokenizer.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(TOKENIZER, tmp)
    shutil.rmtree(dst, ignore_errors=True)
    os.rename(tmp, dst)


def natural_key(name):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def make_bf16(model_dir, seed):
    import torch
    from transformers import T5Config, T5EncoderModel

    enc_dir = Path(model_dir) / "text_encoder"
    tmp = Path(model_dir) / "text_encoder.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    Path(model_dir).mkdir(parents=True, exist_ok=True)

    torch.manual_seed(seed)
    torch.set_default_dtype(torch.bfloat16)
    t0 = time.time()
    config = T5Config(**T5_XXL)
    model = T5EncoderModel(config).eval()
    torch.set_default_dtype(torch.float32)
    n_params = sum(p.numel() for p in model.parameters())
    dtypes = {p.dtype for p in model.parameters()}
    print("built T5EncoderModel: %.3f B parameters, %s, %.1f s" % (n_params / 1e9, dtypes, time.time() - t0),
          flush=True)
    assert dtypes == {torch.bfloat16}, dtypes

    # Finite through all 24 layers? (Random ids of the tokenizer's range, 32 tokens.)
    t0 = time.time()
    with torch.inference_mode():
        ids = torch.randint(3, 500, (1, 32), generator=torch.Generator().manual_seed(seed))
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state.float()
    if not torch.isfinite(out).all():
        sys.exit("make_t5_xxl_random.py: the random model's output is not finite")
    print("forward check (32 tokens): finite, mean %.4g, std %.4g, max |x| %.4g, %.1f s"
          % (out.mean().item(), out.std().item(), out.abs().max().item(), time.time() - t0), flush=True)

    t0 = time.time()
    model.save_pretrained(str(tmp), max_shard_size=MAX_SHARD_SIZE, safe_serialization=True)
    del model, out
    gc.collect()
    if not (tmp / INDEX_NAME).is_file():
        # One shard only (cannot happen at this size, but keep the layout the brief asks for).
        sys.exit("make_t5_xxl_random.py: save_pretrained wrote no %s" % INDEX_NAME)
    shutil.rmtree(enc_dir, ignore_errors=True)
    os.rename(tmp, enc_dir)
    print("saved %s (%s) in %.1f s" % (enc_dir, gb(dir_bytes(enc_dir)), time.time() - t0), flush=True)


def write_f32_shard(path, names, src_file_of, src_handles):
    """Streams float32 copies of `names` into one safetensors file."""
    import torch

    header = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name in names:
        shape = src_handles[src_file_of[name]].get_slice(name).get_shape()
        nbytes = 4 * math.prod(shape)
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    blob = json.dumps(header, separators=(",", ":")).encode("utf-8")
    blob += b" " * (-len(blob) % 8)  # data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for name in names:
            t = src_handles[src_file_of[name]].get_tensor(name)
            assert t.dtype == torch.bfloat16, (name, t.dtype)
            w = t.float().contiguous()
            del t
            f.write(memoryview(w.numpy()).cast("B"))
            del w
        f.flush()
        os.fsync(f.fileno())
        assert f.tell() == 8 + len(blob) + offset, path
    # Let the freshly written pages go: they are not needed now and would evict the bf16 source.
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return offset


def make_f32(bf16_dir, model_dir):
    from safetensors import safe_open

    src = Path(bf16_dir) / "text_encoder"
    enc_dir = Path(model_dir) / "text_encoder"
    tmp = Path(model_dir) / "text_encoder.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    t0 = time.time()

    weight_map = json.loads((src / INDEX_NAME).read_text())["weight_map"]
    handles = {f: safe_open(str(src / f), framework="pt") for f in sorted(set(weight_map.values()))}
    names = sorted(weight_map, key=natural_key)
    # Same rule as transformers: a new shard when the next tensor would push this one past 5 GB.
    shards, cur, cur_bytes = [], [], 0
    for name in names:
        nbytes = 4 * math.prod(handles[weight_map[name]].get_slice(name).get_shape())
        if cur and cur_bytes + nbytes > MAX_SHARD_BYTES:
            shards.append(cur)
            cur, cur_bytes = [], 0
        cur.append(name)
        cur_bytes += nbytes
    shards.append(cur)

    total = 0
    new_map = {}
    for k, shard in enumerate(shards, 1):
        fname = "model-%05d-of-%05d.safetensors" % (k, len(shards))
        total += write_f32_shard(tmp / fname, shard, weight_map, handles)
        for name in shard:
            new_map[name] = fname
        print("  wrote %s (%d tensors, %s) at %.1f s" % (fname, len(shard), gb((tmp / fname).stat().st_size),
                                                          time.time() - t0), flush=True)
    handles.clear()
    (tmp / INDEX_NAME).write_text(json.dumps({"metadata": {"total_size": total},
                                              "weight_map": dict(sorted(new_map.items()))}, indent=2) + "\n")

    config = json.loads((src / "config.json").read_text())
    for key in ("torch_dtype", "dtype"):
        if key in config:
            config[key] = "float32"
    if "torch_dtype" not in config and "dtype" not in config:
        config["torch_dtype"] = "float32"
    (tmp / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")

    shutil.rmtree(enc_dir, ignore_errors=True)
    os.rename(tmp, enc_dir)
    print("saved %s (%s) in %.1f s" % (enc_dir, gb(dir_bytes(enc_dir)), time.time() - t0), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bf16-only", action="store_true", help="write the bfloat16 directory only (scripts/bench/bench_cpu.py)")
    args = ap.parse_args()
    start = time.time()
    out = Path(args.outdir).resolve()
    bf16 = out / "t5xxl-bf16"
    f32 = out / "t5xxl-f32"

    if encoder_complete(bf16 / "text_encoder"):
        print("%s: exists, skipped" % (bf16 / "text_encoder"))
    else:
        make_bf16(bf16, args.seed)
    copy_tokenizer(bf16)

    if not args.bf16_only:
        if encoder_complete(f32 / "text_encoder"):
            print("%s: exists, skipped" % (f32 / "text_encoder"))
        else:
            f32.mkdir(parents=True, exist_ok=True)
            make_f32(bf16, f32)
        copy_tokenizer(f32)

    for d in (bf16,) if args.bf16_only else (bf16, f32):
        enc = d / "text_encoder"
        files = sorted(p.name for p in enc.iterdir())
        print("%s: %s; text_encoder %s (%s), tokenizer %s"
              % (d, gb(dir_bytes(d)), gb(dir_bytes(enc)), ", ".join(files), gb(dir_bytes(d / "tokenizer"))))
    print("wall time %.1f s" % (time.time() - start))


if __name__ == "__main__":
    main()

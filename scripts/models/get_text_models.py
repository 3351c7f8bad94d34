#!/usr/bin/env python3
"""Fetch a published text-conditional DiT (PixArt-alpha, Latte-1) and save it in
the layout ditgen reads.

Run on a machine with network access, in the reference Python environment
(scripts/requirements.txt; a virtual environment outside the repository;
sentencepiece: the T5 tokenizer; accelerate: low-memory loading):

    python3 -m venv /root/venv-ditgen && /root/venv-ditgen/bin/pip install -r scripts/requirements.txt
    /root/venv-ditgen/bin/python scripts/models/get_text_models.py --repo PixArt-alpha/PixArt-XL-2-512x512 \\
        --out models/PixArt-XL-2-512x512
    /root/venv-ditgen/bin/python scripts/models/get_text_models.py --repo maxin-cn/Latte-1 --out models/Latte-1

diffusers loads the hub pipeline named by the repository's model_index.json
(PixArtAlphaPipeline, PixArtSigmaPipeline, LattePipeline) and
`save_pretrained(safe_serialization=True)` writes model_index.json,
transformer/, text_encoder/, tokenizer/, vae/ and scheduler/, each a
config plus safetensors weights (large parts sharded, with an index). The
script then checks that the directory has what ditgen reads, in particular
tokenizer/spiece.model: ditgen runs T5Tokenizer's SentencePiece model and
cannot read a tokenizer.json-only folder.

--dtype bfloat16 (or float16) stores the transformer and the T5 text encoder
in that dtype (PixArt's T5-XXL encoder is 19 GB in float32, 9.5 GB in
bfloat16); the VAE stays float32 (ditgen decodes in float32). ditgen runs a
checkpoint stored in any of these dtypes; see model.dtype in docs/config.md.

Copy the output directory to the machine that runs ditgen; ditgen itself never
needs Python or the network.
"""
import argparse
import glob
import importlib
import json
import os
import sys

import torch
import diffusers
from diffusers import DiffusionPipeline

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# The pipelines whose parts ditgen reads; their transformer and text encoder
# take --dtype.
TEXT_PIPELINES = ("PixArtAlphaPipeline", "PixArtSigmaPipeline", "LattePipeline")
WIDE_PARTS = ("transformer", "text_encoder")


def load_part(repo, index, name, dtype, revision):
    """One component, loaded by the class model_index.json names, in dtype."""
    library, class_name = index[name]
    cls = getattr(importlib.import_module(library), class_name)
    return cls.from_pretrained(repo, subfolder=name, torch_dtype=dtype, revision=revision)


def weights_in(folder):
    return sorted(glob.glob(os.path.join(folder, "*.safetensors")))


def check_layout(out):
    """What ditgen reads; returns a list of problems (empty when the directory is complete)."""
    problems = []
    if not os.path.isfile(os.path.join(out, "model_index.json")):
        problems.append("model_index.json is missing")
    for part in ("transformer", "text_encoder", "vae"):
        folder = os.path.join(out, part)
        if not os.path.isfile(os.path.join(folder, "config.json")):
            problems.append(f"{part}/config.json is missing")
        if not weights_in(folder):
            problems.append(f"{part}/ has no *.safetensors weights")
        if glob.glob(os.path.join(folder, "*.bin")):
            problems.append(f"{part}/ has .bin (pickle) weights: ditgen reads safetensors only")
    if not os.path.isfile(os.path.join(out, "scheduler", "scheduler_config.json")):
        problems.append("scheduler/scheduler_config.json is missing")
    tokenizer = os.path.join(out, "tokenizer")
    if not os.path.isfile(os.path.join(tokenizer, "spiece.model")):
        if os.path.isfile(os.path.join(tokenizer, "tokenizer.json")):
            problems.append(
                "tokenizer/spiece.model is missing: this repository's tokenizer folder has only tokenizer.json "
                "(a fast tokenizer), which ditgen does not read. ditgen needs T5Tokenizer's SentencePiece model: "
                "copy spiece.model of the same vocabulary into tokenizer/ (for T5-v1.1-XXL encoders, e.g. "
                "tokenizer/spiece.model of PixArt-alpha/PixArt-XL-2-512x512 or spiece.model of google/t5-v1_1-xxl)")
        else:
            problems.append("tokenizer/spiece.model is missing")
    # ditgen checks this too, but only when it runs: say it now.
    try:
        with open(os.path.join(out, "transformer", "config.json")) as f:
            caption_channels = json.load(f).get("caption_channels")
        with open(os.path.join(out, "text_encoder", "config.json")) as f:
            d_model = json.load(f).get("d_model")
        if caption_channels is not None and d_model is not None and caption_channels != d_model:
            problems.append(f"transformer caption_channels {caption_channels} != text_encoder d_model {d_model}")
    except (OSError, ValueError):
        pass  # reported above
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", default="PixArt-alpha/PixArt-XL-2-512x512",
                    help="hub id (PixArt-alpha/PixArt-XL-2-512x512, maxin-cn/Latte-1, ...) or local diffusers directory")
    ap.add_argument("--out", required=True, help="output model directory")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="float32",
                    help="stored dtype of the transformer and the text encoder (the VAE stays float32)")
    ap.add_argument("--revision", default=None, help="hub revision (branch, tag or commit)")
    args = ap.parse_args()

    index = DiffusionPipeline.load_config(args.repo, revision=args.revision)
    pipeline_name = index.get("_class_name", "")
    if pipeline_name not in TEXT_PIPELINES:
        sys.exit(f"{args.repo}: model_index.json names {pipeline_name or 'no pipeline'}; this script fetches "
                 f"{', '.join(TEXT_PIPELINES)} (scripts/models/get_dit_xl.py fetches DiT)")
    missing = [p for p in WIDE_PARTS + ("tokenizer", "vae", "scheduler") if p not in index or index[p][0] is None]
    if missing:
        sys.exit(f"{args.repo}: model_index.json has no {', '.join(missing)}: ditgen needs every part")

    dtype = DTYPES[args.dtype]
    # The transformer and the text encoder in --dtype (loaded directly in it,
    # so T5-XXL never exists in float32 when bfloat16 is asked for); the rest
    # of the pipeline (VAE, tokenizer, scheduler) as published, in float32.
    parts = {name: load_part(args.repo, index, name, dtype, args.revision) for name in WIDE_PARTS}
    pipe_cls = getattr(diffusers, pipeline_name)
    pipe = pipe_cls.from_pretrained(args.repo, torch_dtype=torch.float32, revision=args.revision, **parts)
    pipe.save_pretrained(args.out, safe_serialization=True)

    problems = check_layout(args.out)
    if problems:
        print(f"saved {args.repo} to {args.out}, but ditgen cannot run it yet:", file=sys.stderr)
        for p in problems:
            print(f"  - {p}", file=sys.stderr)
        sys.exit(1)
    sizes = {p: sum(os.path.getsize(w) for w in weights_in(os.path.join(args.out, p)))
             for p in ("transformer", "text_encoder", "vae")}
    print(f"saved {args.repo} ({pipeline_name}) to {args.out}: transformer and text_encoder in {args.dtype}; "
          + ", ".join(f"{p} {s / 2**30:.2f} GiB" for p, s in sizes.items()))


if __name__ == "__main__":
    main()

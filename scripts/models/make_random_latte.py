#!/usr/bin/env python3
"""Make a LattePipeline directory with a random LatteTransformer3DModel, for benchmarks.

transformer/ is diffusers' own class with the given sizes and random
weights (torch seed 0), saved by save_pretrained in float32, one file;
model_index.json, scheduler/, text_encoder/, tokenizer/ and vae/ are copied
from tests/fixtures/latte_tiny (its tiny T5 has d_model 40, hence
caption_channels 40 by default whatever the transformer's size: the caption
projection on a handful of text tokens is a negligible part of a forward;
--caption-channels 4096 gives Latte-1's for forward-only benchmarks, which
feed their own text embeddings, such as scripts/bench/bench_cpu.py).

Usage (the reference Python environment, scripts/requirements.txt):
    python3 -m venv /root/venv-ditgen && /root/venv-ditgen/bin/pip install -r scripts/requirements.txt
    /root/venv-ditgen/bin/python scripts/models/make_random_latte.py OUT --layers 28 --heads 16 --head-dim 72 \\
           --sample-size 64 --video-length 16
"""
import argparse
import os
import shutil

import torch
from diffusers import LatteTransformer3DModel

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURE = os.path.join(REPO, "tests", "fixtures", "latte_tiny")

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("out")
p.add_argument("--layers", type=int, required=True)
p.add_argument("--heads", type=int, required=True)
p.add_argument("--head-dim", type=int, required=True)
p.add_argument("--sample-size", type=int, required=True, help="latent height and width the positions are made for")
p.add_argument("--video-length", type=int, default=16)
p.add_argument("--caption-channels", type=int, default=40,
               help="text embedding width (40: the copied tiny T5's; 4096: Latte-1's T5-XXL)")
a = p.parse_args()

os.makedirs(a.out, exist_ok=True)
for d in ("scheduler", "text_encoder", "tokenizer", "vae"):
    shutil.rmtree(os.path.join(a.out, d), ignore_errors=True)
    shutil.copytree(os.path.join(FIXTURE, d), os.path.join(a.out, d))
shutil.copy(os.path.join(FIXTURE, "model_index.json"), a.out)

torch.manual_seed(0)
width = a.heads * a.head_dim
m = LatteTransformer3DModel(
    num_attention_heads=a.heads, attention_head_dim=a.head_dim, in_channels=4, out_channels=8,
    num_layers=a.layers, cross_attention_dim=width, caption_channels=a.caption_channels,
    sample_size=a.sample_size, patch_size=2, video_length=a.video_length, norm_type="ada_norm_single",
    activation_fn="gelu-approximate", norm_elementwise_affine=False, norm_eps=1e-6,
    attention_bias=True, num_embeds_ada_norm=1000).to(torch.float32)
print(f"parameters: {sum(t.numel() for t in m.parameters()) / 1e6:.1f} M")
m.save_pretrained(os.path.join(a.out, "transformer"), safe_serialization=True, max_shard_size="100GB")

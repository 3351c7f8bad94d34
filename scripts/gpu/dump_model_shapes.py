#!/usr/bin/env python3
"""Write scripts/gpu/models/NAME/{config.json, shapes.json} (every weight's
name and shape) for the real-size transformers timed on GPU machines:
Latte-1 (LatteTransformer3DModel, 28 + 28 blocks, 1152 wide, T5-XXL captions)
and PixArt-alpha XL-2-1024 (PixArtTransformer2DModel). Built on the meta
device, so no memory is used; make_random_weights.py turns a list into
weights where diffusers is not installed.

Usage (the reference Python environment, scripts/requirements.txt):
    python3 -m venv /root/venv-ditgen && /root/venv-ditgen/bin/pip install -r scripts/requirements.txt
    /root/venv-ditgen/bin/python scripts/gpu/dump_model_shapes.py
"""
import json, os, torch
from diffusers import LatteTransformer3DModel, PixArtTransformer2DModel
common = dict(num_attention_heads=16, attention_head_dim=72, in_channels=4, out_channels=8, num_layers=28,
              cross_attention_dim=1152, caption_channels=4096, patch_size=2, norm_type="ada_norm_single",
              activation_fn="gelu-approximate", norm_elementwise_affine=False, norm_eps=1e-6,
              attention_bias=True, num_embeds_ada_norm=1000)
models = {"latte-1": lambda: LatteTransformer3DModel(sample_size=64, video_length=16, **common),
          "pixart-xl-2-1024": lambda: PixArtTransformer2DModel(sample_size=128, **common)}
for name, make in models.items():
    with torch.device("meta"):
        m = make()
    d = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models", name)
    os.makedirs(d, exist_ok=True)
    m.save_config(d)
    json.dump({k: list(v.shape) for k, v in m.state_dict().items()}, open(f"{d}/shapes.json", "w"))
    print(name, sum(v.numel() for v in m.state_dict().values()) / 1e6, "M")

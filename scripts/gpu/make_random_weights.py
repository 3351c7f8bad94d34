#!/usr/bin/env python3
"""Write a diffusers transformer directory with random bfloat16 weights from
a weight list (scripts/gpu/models/NAME: config.json and shapes.json, made by
dump_model_shapes.py), for timing real-size models on a GPU machine that has
PyTorch but not diffusers. N(0, 0.02), norm weights 1, biases 0: not a model,
only its sizes.

Usage: python3 scripts/gpu/make_random_weights.py scripts/gpu/models/latte-1 /tmp/latte-1
(python3: the GPU machine's own, with torch and safetensors; elsewhere the
reference Python environment, scripts/requirements.txt:
    python3 -m venv /root/venv-ditgen && /root/venv-ditgen/bin/pip install -r scripts/requirements.txt)
"""
import json
import os
import shutil
import sys

import torch
from safetensors.torch import save_file

src, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
shutil.copy(os.path.join(src, "config.json"), out)
device = "cuda" if torch.cuda.is_available() else "cpu"
g = torch.Generator(device=device).manual_seed(0)
tensors = {}
for name, shape in json.load(open(os.path.join(src, "shapes.json"))).items():
    if name.endswith("bias"):
        t = torch.zeros(shape, dtype=torch.bfloat16)
    elif "norm" in name and name.endswith("weight"):
        t = torch.ones(shape, dtype=torch.bfloat16)
    else:
        t = (torch.randn(shape, generator=g, device=device) * 0.02).to(torch.bfloat16).cpu()
    tensors[name] = t.contiguous()
save_file(tensors, os.path.join(out, "diffusion_pytorch_model.safetensors"))
print(f"wrote {out}: {sum(t.numel() for t in tensors.values()) / 1e6:.1f} M parameters")

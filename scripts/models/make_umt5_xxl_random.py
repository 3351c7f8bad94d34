#!/usr/bin/env python3
"""A full-size random UMT5-XXL text encoder (Wan's: google/umt5-xxl's encoder,
5.7 B parameters) in bfloat16, for memory and speed measurements of a whole
Wan run without downloading weights.

Reads the published config (configs/models/Wan2.1-T2V-1.3B-Diffusers/
text_encoder/config.json), builds transformers' UMT5EncoderModel with its
default initialisation in bfloat16 (torch.set_default_dtype, so the float32
model never exists) and saves it with save_pretrained (5 GB shards) to
OUT/text_encoder/ (~11.4 GB). Usage (the Wan-era Python environment,
scripts/fixtures/requirements-wan.txt):

    python3 -m venv /root/venv-wan && /root/venv-wan/bin/pip install -r scripts/fixtures/requirements-wan.txt
    /root/venv-wan/bin/python scripts/models/make_umt5_xxl_random.py OUT
"""
import json
import os
import sys

import torch
from transformers import UMT5Config, UMT5EncoderModel

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(REPO, "configs", "models", "Wan2.1-T2V-1.3B-Diffusers", "text_encoder", "config.json")


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = os.path.join(sys.argv[1], "text_encoder")
    if os.path.exists(os.path.join(out, "config.json")):
        print(f"{out}: exists")
        return
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    cfg = UMT5Config(**{k: v for k, v in json.load(open(CONFIG)).items() if not k.startswith("_")})
    model = UMT5EncoderModel(cfg).eval()
    tmp = out + ".tmp"
    model.save_pretrained(tmp, max_shard_size="5GB", safe_serialization=True)
    os.rename(tmp, out)
    print(f"wrote {out}: {sum(p.numel() for p in model.parameters()) / 1e9:.2f} B parameters, bfloat16")


if __name__ == "__main__":
    main()

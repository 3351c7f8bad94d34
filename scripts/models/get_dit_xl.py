#!/usr/bin/env python3
"""Fetch a published DiT-XL/2 checkpoint and save it in the layout ditgen reads.

Run on a machine with network access, in the reference Python environment
(scripts/requirements.txt; a virtual environment outside the repository):

    python3 -m venv /root/venv-ditgen && /root/venv-ditgen/bin/pip install -r scripts/requirements.txt
    /root/venv-ditgen/bin/python scripts/models/get_dit_xl.py --repo facebook/DiT-XL-2-256 --out models/DiT-XL-2-256
    /root/venv-ditgen/bin/python scripts/models/get_dit_xl.py --repo facebook/DiT-XL-2-512 --out models/DiT-XL-2-512

diffusers loads the hub checkpoint (converting legacy .bin weights and old
attention names on the way) and `save_pretrained(safe_serialization=True)`
writes model_index.json (with id2label), transformer/, vae/ and scheduler/
as float32 safetensors. Copy the output directory to the machine that runs
ditgen; ditgen itself never needs Python or the network.

An original DiT repository checkpoint (DiT-XL-2-256x256.pt) can be converted
first with diffusers' scripts/convert_dit_to_diffusers.py, then given to
--repo as a local directory.
"""
import argparse
import json
import os

import torch
from diffusers import DiTPipeline


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", default="facebook/DiT-XL-2-256", help="hub id or local diffusers directory")
    ap.add_argument("--out", required=True, help="output model directory")
    args = ap.parse_args()
    pipe = DiTPipeline.from_pretrained(args.repo, torch_dtype=torch.float32)
    pipe.save_pretrained(args.out, safe_serialization=True)
    # DiTPipeline keeps id2label out of its saved config: write it back (the
    # synonyms of each class joined by ", ", as the hub's model_index.json
    # has them) so class names work in ditgen configs.
    names = {}
    for name, idx in pipe.labels.items():
        names.setdefault(int(idx), []).append(name)
    index_path = os.path.join(args.out, "model_index.json")
    with open(index_path) as f:
        index = json.load(f)
    index["id2label"] = {str(i): ", ".join(names[i]) for i in sorted(names)}
    with open(index_path, "w") as f:
        json.dump(index, f, indent=2)
    print(f"saved {args.repo} to {args.out}")


if __name__ == "__main__":
    main()

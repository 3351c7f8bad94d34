#!/usr/bin/env python3
"""Make a random-weight DiT pipeline with the published shapes, for smoke
runs and benchmarks of the whole job (transformer, sampler, VAE, PNG).

    python3 -m venv /root/venv-ditgen && /root/venv-ditgen/bin/pip install -r scripts/requirements.txt
    /root/venv-ditgen/bin/python scripts/models/make_random_model.py --preset dit-xl-2-256 --out /tmp/DiT-XL-2-256-random
    ./build/ditgen --config configs/dit-xl-2-256.json --set model.path=/tmp/DiT-XL-2-256-random --steps 2

The directory is a full DiTPipeline layout: transformer/ (DiTTransformer2DModel
with DiT-XL/2 sizes), vae/ (AutoencoderKL with the sd-vae-ft-ema sizes), the
DiT DDIM scheduler config and an id2label of 1000 placeholder names. Weights
are random (fixed seed), so the images are noise; the shapes, the FLOPs and
the memory are those of the real model. Needs torch + diffusers (the
reference Python environment, scripts/requirements.txt); the output (about 3 GB for XL/2) belongs outside the repository.
"""
import argparse
import json
import os

import torch
from diffusers import AutoencoderKL, DDIMScheduler, DiTTransformer2DModel

PRESETS = {
    # name: (sample_size, layers, heads, head_dim)
    "dit-xl-2-256": (32, 28, 16, 72),
    "dit-xl-2-512": (64, 28, 16, 72),
    "dit-b-2-256": (32, 12, 12, 64),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=sorted(PRESETS), default="dit-xl-2-256")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    sample, layers, heads, head_dim = PRESETS[args.preset]
    torch.manual_seed(args.seed)

    transformer = DiTTransformer2DModel(
        num_attention_heads=heads, attention_head_dim=head_dim, in_channels=4, out_channels=8,
        num_layers=layers, sample_size=sample, patch_size=2, num_embeds_ada_norm=1000)
    vae = AutoencoderKL(
        in_channels=3, out_channels=3, latent_channels=4, layers_per_block=2, norm_num_groups=32,
        block_out_channels=(128, 256, 512, 512), sample_size=sample * 8,
        down_block_types=("DownEncoderBlock2D",) * 4, up_block_types=("UpDecoderBlock2D",) * 4)
    with torch.no_grad():  # keep activations O(1) through 28 random blocks
        for p in list(transformer.parameters()) + list(vae.parameters()):
            if p.dim() > 1:
                p.normal_(0.0, 0.02)
    scheduler = DDIMScheduler(num_train_timesteps=1000, beta_start=0.0001, beta_end=0.02, beta_schedule="linear",
                              clip_sample=False, set_alpha_to_one=True, steps_offset=0)

    transformer.save_pretrained(os.path.join(args.out, "transformer"), safe_serialization=True)
    vae.save_pretrained(os.path.join(args.out, "vae"), safe_serialization=True)
    scheduler.save_pretrained(os.path.join(args.out, "scheduler"))
    index = {
        "_class_name": "DiTPipeline",
        "transformer": ["diffusers", "DiTTransformer2DModel"],
        "vae": ["diffusers", "AutoencoderKL"],
        "scheduler": ["diffusers", "DDIMScheduler"],
        "id2label": {str(i): f"class {i}" for i in range(1000)},
    }
    with open(os.path.join(args.out, "model_index.json"), "w") as f:
        json.dump(index, f, indent=2)
    print(f"wrote {args.preset} with random weights to {args.out}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Parity reference for the default video model (samples/latte-shapes):
diffusers' own LattePipeline runs it for two prompts from given noise, and
tests/pipeline/test_video_default_model.cpp checks that ditgen matches.

Writes tests/fixtures/latte_shapes_reference/:
  noise.safetensors     "noise"   (2, 4, 16, 8, 8) torch.randn, seed 11
                                  ([outputs, C, F, h, w], ditgen's --init-noise)
  expected.safetensors  "latents" final DDIM latents (10 steps, guidance 5),
                                  each prompt alone (batch of one)
                        "frames"  LattePipeline's output_type "pt" frames
                                  [outputs, F, 3, H, W] in [0, 1]
  case.json             prompts, steps, guidance, versions
Run after scripts/train_video_default.py (same venv):
    /root/venv-t5/bin/python scripts/make_video_default_reference.py
"""
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402

torch.use_deterministic_algorithms(True)
torch.set_num_threads(1)

import diffusers  # noqa: E402
import transformers  # noqa: E402
from diffusers import LattePipeline  # noqa: E402
from diffusers.utils import logging as diffusers_logging  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

diffusers_logging.set_verbosity_error()
diffusers_logging.disable_progress_bar()

REPO = Path(__file__).resolve().parent.parent
MODEL = REPO / "samples" / "latte-shapes"
OUT = REPO / "tests" / "fixtures" / "latte_shapes_reference"
PROMPTS = ["a red circle moving right", "a blue star growing"]
STEPS, GUIDANCE, SEED = 10, 5.0, 11


@torch.no_grad()
def main():
    pipe = LattePipeline.from_pretrained(str(MODEL))
    pipe.set_progress_bar_config(disable=True)
    cfg = pipe.transformer.config
    frames = cfg.video_length
    size = cfg.sample_size * pipe.vae_scale_factor
    noise = torch.randn((len(PROMPTS), cfg.in_channels, frames, cfg.sample_size, cfg.sample_size),
                        generator=torch.Generator().manual_seed(SEED))
    common = dict(negative_prompt="", num_inference_steps=STEPS, guidance_scale=GUIDANCE, video_length=frames,
                  height=size, width=size, clean_caption=False, mask_feature=True)
    lats, vids = [], []
    for i, prompt in enumerate(PROMPTS):
        lats.append(pipe(prompt=prompt, latents=noise[i:i + 1].clone(), output_type="latent", **common).frames)
        vids.append(pipe(prompt=prompt, latents=noise[i:i + 1].clone(), output_type="pt", **common).frames)
    OUT.mkdir(parents=True, exist_ok=True)
    save_file({"noise": noise.contiguous()}, str(OUT / "noise.safetensors"))
    save_file({"latents": torch.cat(lats).contiguous(), "frames": torch.cat(vids).contiguous()},
              str(OUT / "expected.safetensors"))
    case = {"model": "samples/latte-shapes", "prompts": PROMPTS, "negative_prompt": "", "steps": STEPS,
            "guidance_scale": GUIDANCE, "scheduler": "the model's DDIMScheduler", "frames": frames,
            "height": size, "width": size, "noise": f"torch.randn(..., generator=manual_seed({SEED}))",
            "call": "LattePipeline(prompt=p, latents=noise[i:i+1], output_type='latent' | 'pt', clean_caption=False, "
                    "mask_feature=True), one call per prompt",
            "versions": {"diffusers": diffusers.__version__, "transformers": transformers.__version__,
                         "torch": torch.__version__}}
    (OUT / "case.json").write_text(json.dumps(case, indent=2) + "\n")
    print(f"wrote {OUT}: latents {tuple(torch.cat(lats).shape)}, frames {tuple(torch.cat(vids).shape)}")


if __name__ == "__main__":
    main()

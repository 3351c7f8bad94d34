#!/usr/bin/env python3
"""Parity reference for the shipped default model (samples/dit-shapes):
diffusers runs it for two classes, and tests/pipeline/test_default_model.cpp
checks that ditgen matches.

Writes tests/fixtures/dit_shapes_reference/:
  noise.safetensors     "noise"   (2, 4, 8, 8) torch.randn, seed 11
  expected.safetensors  "latents" final DDIM latents (25 steps, guidance 4)
                        "image"   decoded, (image / 2 + 0.5).clamp(0, 1), NCHW
  case.json             labels, steps, guidance, versions
The sampling loop is make_fixtures.sample_latents (DiTPipeline.__call__ with
the null class = num_embeds_ada_norm), cross-checked there against
DiTPipeline itself.  Run after scripts/train_default.py:
    /path/to/venv/bin/python scripts/make_default_reference.py
"""
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_fixtures import load_components, sample_latents  # noqa: E402
import diffusers  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
MODEL = REPO / "samples" / "dit-shapes"
OUT = REPO / "tests" / "fixtures" / "dit_shapes_reference"
LABELS = ["red circle", "blue star"]
STEPS, GUIDANCE, SEED = 25, 4.0, 11


def main():
    transformer, vae, ddim = load_components(MODEL)
    id2label = json.loads((MODEL / "model_index.json").read_text())["id2label"]
    label2id = {v: int(k) for k, v in id2label.items()}
    ids = [label2id[n] for n in LABELS]
    cfg = transformer.config
    noise = torch.randn((len(ids), cfg.in_channels, cfg.sample_size, cfg.sample_size),
                        generator=torch.Generator().manual_seed(SEED))
    with torch.no_grad():
        latents = sample_latents(transformer, ddim, noise, ids, GUIDANCE, STEPS)
        image = (vae.decode((1 / vae.config.scaling_factor) * latents).sample / 2 + 0.5).clamp(0, 1)
    OUT.mkdir(parents=True, exist_ok=True)
    save_file({"noise": noise.contiguous()}, OUT / "noise.safetensors")
    save_file({"latents": latents.contiguous(), "image": image.contiguous()}, OUT / "expected.safetensors")
    (OUT / "case.json").write_text(json.dumps({
        "model": "samples/dit-shapes", "class_labels": LABELS, "class_ids": ids, "steps": STEPS,
        "guidance_scale": GUIDANCE, "scheduler": "ddim (the model's scheduler_config.json)",
        "noise": f"torch.randn({list(noise.shape)}, generator=torch.Generator().manual_seed({SEED}))",
        "versions": {"diffusers": diffusers.__version__, "torch": torch.__version__},
    }, indent=2) + "\n")
    print(f"wrote {OUT}: latents std {latents.std():.3f}, image mean {image.mean():.3f}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Generate the tiny diffusers-layout DiT fixtures and their reference outputs.

Usage (from the repository root):

    /path/to/venv/bin/python scripts/make_fixtures.py

Needs torch, diffusers and safetensors (CPU is enough).  Writes

    tests/fixtures/dit_odd/          float32 DiT, 5x5 token grid, learned sigma
    tests/fixtures/dit_small_bf16/   bfloat16 sharded DiT, float16 VAE

each a DiTPipeline directory (model_index.json, transformer/, vae/,
scheduler/) plus reference/ with noise.safetensors, expected.safetensors,
case.json, run_ddim.json and run_dpm.json.  The C++ parity tests read these
files; they never run Python.  Everything is made by diffusers' own classes,
on CPU, in float32, from fixed seeds, so re-running the script reproduces the
same files (up to the library versions recorded in case.json).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import torch

torch.set_default_dtype(torch.float32)
torch.use_deterministic_algorithms(True)
torch.set_num_threads(1)  # fixed reduction order, reproducible bits

import diffusers  # noqa: E402
from diffusers import (  # noqa: E402
    AutoencoderKL,
    DDIMScheduler,
    DiTPipeline,
    DiTTransformer2DModel,
    DPMSolverMultistepScheduler,
)
from safetensors.torch import load_file, save_file  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"

# facebook/DiT-XL-2-256 scheduler/scheduler_config.json, verbatim (written by
# diffusers 0.12).  It has no `timestep_spacing`, so DDIMScheduler uses its
# default "leading".  DPMSolverMultistepScheduler.from_config(ddim.config) does
# NOT inherit that: diffusers records the keys that were filled from defaults
# in `_use_default_values` and drops them when building another class, so DPM
# uses its own default "linspace".  A config saved by a recent diffusers lists
# every key explicitly ("timestep_spacing": "leading"), and then DPM inherits
# "leading".  Fixture dit_odd writes the published file verbatim; fixture
# dit_small_bf16 writes the full modern dump of the same scheduler, so the C++
# side must get both cases right.
DIT_SCHEDULER_CONFIG = {
    "_class_name": "DDIMScheduler",
    "_diffusers_version": "0.12.0.dev0",
    "beta_end": 0.02,
    "beta_schedule": "linear",
    "beta_start": 0.0001,
    "clip_sample": False,
    "num_train_timesteps": 1000,
    "prediction_type": "epsilon",
    "set_alpha_to_one": True,
    "steps_offset": 0,
    "trained_betas": None,
}


# --------------------------------------------------------------------------
# model construction
# --------------------------------------------------------------------------


def randomize_(module: torch.nn.Module, gen: torch.Generator, gain: float, norm_jitter: float = 0.1) -> None:
    """Re-initialise every parameter independently from `gen`.

    Weights: randn * gain / sqrt(fan_in) (fan_in = all dims but the first), so
    activations stay O(1).  Biases: randn * 0.05 * gain.  Normalisation
    weights (GroupNorm/LayerNorm, 1-D params named '*norm*.weight'): 1 + jitter.
    Embedding tables: randn * 0.5.  Nothing is zero and nothing is tied: every
    block's norm1.emb gets its own values.
    """
    with torch.no_grad():
        for name, p in module.named_parameters():
            shape = tuple(p.shape)
            if p.ndim == 1 and ("norm" in name.split(".")[-2]) and name.endswith("weight"):
                v = 1.0 + norm_jitter * torch.randn(shape, generator=gen)
            elif p.ndim == 1:
                v = 0.05 * gain * torch.randn(shape, generator=gen)
            elif "embedding_table" in name:
                v = 0.5 * torch.randn(shape, generator=gen)
            else:
                fan_in = p[0].numel()
                v = torch.randn(shape, generator=gen) * (gain / fan_in**0.5)
            p.copy_(v.to(p.dtype))


def make_vae(block_out_channels, norm_num_groups, sample_size, seed):
    vae = AutoencoderKL(
        in_channels=3,
        out_channels=3,
        latent_channels=4,
        block_out_channels=tuple(block_out_channels),
        layers_per_block=1,
        norm_num_groups=norm_num_groups,
        down_block_types=("DownEncoderBlock2D",) * len(block_out_channels),
        up_block_types=("UpDecoderBlock2D",) * len(block_out_channels),
        sample_size=sample_size,
        scaling_factor=0.18215,
    )
    randomize_(vae, torch.Generator().manual_seed(seed), gain=1.0)
    with torch.no_grad():  # fewer clamped pixels in the final image
        vae.decoder.conv_out.weight.mul_(0.6)
    return vae.eval()


def make_dit(seed, gain, **cfg):
    model = DiTTransformer2DModel(**cfg)
    randomize_(model, torch.Generator().manual_seed(seed), gain=gain)
    return model.eval()


# --------------------------------------------------------------------------
# reference sampling loop (mirrors DiTPipeline.__call__, diffusers 0.42)
# --------------------------------------------------------------------------


@torch.no_grad()
def sample_latents(transformer, scheduler, noise, class_labels, guidance_scale, steps):
    """DiTPipeline.__call__ up to (not including) the 1/scaling_factor + decode.

    Differences from the pipeline, deliberately:
      * the initial latents are `noise` (given) instead of randn_tensor;
      * class_null is transformer.config.num_embeds_ada_norm.  DiTPipeline
        hardcodes 1000, which is only the null class of the ImageNet models
        (num_embeds_ada_norm=1000); with 10 classes index 1000 would be out of
        range.  The label table has num_embeds_ada_norm + 1 rows; the last row
        is the null (dropped) class.
    Everything else (doubling, re-syncing halves each step, timestep expand,
    guidance on the first in_channels channels only, dropping learned-sigma
    channels, scheduler.step on the doubled batch, first half at the end) is
    as in the pipeline.
    """
    batch_size = len(class_labels)
    latent_channels = transformer.config.in_channels
    latents = noise.clone()
    latent_model_input = torch.cat([latents] * 2) if guidance_scale > 1 else latents

    class_labels = torch.tensor(class_labels).reshape(-1)
    class_null = torch.tensor([transformer.config.num_embeds_ada_norm] * batch_size)
    class_labels_input = torch.cat([class_labels, class_null], 0) if guidance_scale > 1 else class_labels

    scheduler.set_timesteps(steps)
    for t in scheduler.timesteps:
        if guidance_scale > 1:
            half = latent_model_input[: len(latent_model_input) // 2]
            latent_model_input = torch.cat([half, half], dim=0)
        latent_model_input = scheduler.scale_model_input(latent_model_input, t)

        timesteps = t
        if len(timesteps.shape) == 0:
            timesteps = timesteps[None]
        timesteps = timesteps.expand(latent_model_input.shape[0])
        noise_pred = transformer(latent_model_input, timestep=timesteps, class_labels=class_labels_input).sample

        if guidance_scale > 1:
            eps, rest = noise_pred[:, :latent_channels], noise_pred[:, latent_channels:]
            cond_eps, uncond_eps = torch.split(eps, len(eps) // 2, dim=0)
            half_eps = uncond_eps + guidance_scale * (cond_eps - uncond_eps)
            eps = torch.cat([half_eps, half_eps], dim=0)
            noise_pred = torch.cat([eps, rest], dim=1)

        if transformer.config.out_channels // 2 == latent_channels:
            model_output, _ = torch.split(noise_pred, latent_channels, dim=1)
        else:
            model_output = noise_pred

        latent_model_input = scheduler.step(model_output, t, latent_model_input).prev_sample

    if guidance_scale > 1:
        latents, _ = latent_model_input.chunk(2, dim=0)
    else:
        latents = latent_model_input
    return latents


def cross_check_with_pipeline(fdir, transformer, vae, scheduler, noise_seed, labels, guidance_scale, steps, expected_image):
    """Run diffusers' real DiTPipeline (with the null class remapped 1000 -> N)
    and check it gives the same image as our loop.  Independent check of the
    loop transcription above."""
    n = transformer.config.num_embeds_ada_norm
    orig_forward = transformer.forward

    def forward(hidden_states, timestep=None, class_labels=None, **kw):
        class_labels = torch.where(class_labels == 1000, torch.full_like(class_labels, n), class_labels)
        return orig_forward(hidden_states, timestep=timestep, class_labels=class_labels, **kw)

    transformer.forward = forward
    try:
        pipe = DiTPipeline(transformer=transformer, vae=vae, scheduler=scheduler)
        pipe.set_progress_bar_config(disable=True)
        out = pipe(
            class_labels=list(labels),
            guidance_scale=guidance_scale,
            generator=torch.Generator().manual_seed(noise_seed),
            num_inference_steps=steps,
            output_type="pt",
        ).images
    finally:
        del transformer.forward
    d = (out - expected_image).abs().max().item()
    assert d == 0.0, f"{fdir.name}: DiTPipeline disagrees with the script's loop by {d}"


# --------------------------------------------------------------------------
# one fixture
# --------------------------------------------------------------------------


def save_pipeline(fdir, transformer, vae, id2label, transformer_dtype, vae_dtype, shard, scheduler_config):
    if fdir.exists():
        shutil.rmtree(fdir)
    sched = DDIMScheduler.from_config(DIT_SCHEDULER_CONFIG)
    pipe = DiTPipeline(transformer=transformer.to(transformer_dtype), vae=vae.to(vae_dtype), scheduler=sched)
    # DiTPipeline.__init__ does not register id2label; the published
    # model_index.json carries it, so register it explicitly.
    pipe.register_to_config(id2label={str(k): v for k, v in id2label.items()})
    pipe.save_pretrained(fdir, safe_serialization=True)
    if shard:
        tdir = fdir / "transformer"
        for f in tdir.glob("*.safetensors"):
            f.unlink()
        transformer.save_pretrained(tdir, safe_serialization=True, max_shard_size=shard)
        n = len(list(tdir.glob("*.safetensors")))
        assert n >= 2 and (tdir / "diffusion_pytorch_model.safetensors.index.json").exists(), n
    # save_pretrained wrote the full modern dump (every key explicit).  For
    # "published", replace it by the file exactly as published.
    if scheduler_config == "published":
        with open(fdir / "scheduler" / "scheduler_config.json", "w") as f:
            json.dump(DIT_SCHEDULER_CONFIG, f, indent=2, sort_keys=True)
            f.write("\n")
    else:
        assert scheduler_config == "full"
        with open(fdir / "scheduler" / "scheduler_config.json") as f:
            assert json.load(f)["timestep_spacing"] == "leading"
    # back to float32 for in-process use
    transformer.float()
    vae.float()


def load_components(fdir):
    transformer = DiTTransformer2DModel.from_pretrained(fdir, subfolder="transformer").float().eval()
    vae = AutoencoderKL.from_pretrained(fdir, subfolder="vae").float().eval()
    ddim = DDIMScheduler.from_pretrained(fdir, subfolder="scheduler")
    return transformer, vae, ddim


def check_finite_nonzero(name, t):
    assert torch.isfinite(t).all(), f"{name}: not finite"
    assert t.abs().max().item() > 1e-3, f"{name}: all near zero"


def make_fixture(spec):
    fdir = FIXTURES / spec["name"]
    rel = fdir.relative_to(REPO).as_posix()
    print(f"== {rel}")
    transformer = make_dit(spec["seed"], spec["gain"], **spec["transformer"])
    vae = make_vae(**spec["vae"], seed=spec["seed"] + 1)
    for n, p in list(transformer.named_parameters()) + list(vae.named_parameters()):
        assert p.abs().max().item() > 0, f"all-zero parameter {n}"
    id2label = spec["id2label"]
    save_pipeline(fdir, transformer, vae, id2label, spec["transformer_dtype"], spec["vae_dtype"], spec.get("shard"), spec["scheduler_config"])

    # All references are computed on the weights as saved (rounded to the
    # storage dtype), upcast to float32.
    transformer, vae, ddim = load_components(fdir)
    cfg = transformer.config
    C, S = cfg.in_channels, cfg.sample_size
    ncls = cfg.num_embeds_ada_norm
    labels = spec["labels"]
    images = len(labels)
    steps, gs = spec["steps"], spec["guidance_scale"]

    ref = fdir / "reference"
    ref.mkdir()
    g = torch.Generator().manual_seed(spec["noise_seed"])
    noise = torch.randn((images, C, S, S), generator=g)
    save_file({"noise": noise.contiguous()}, ref / "noise.safetensors")

    exp = {}
    with torch.no_grad():
        # direct forward pass
        g = torch.Generator().manual_seed(spec["noise_seed"] + 100)
        fin = torch.randn((2 * images, C, S, S), generator=g)
        ft = torch.tensor(spec["forward_timesteps"], dtype=torch.int64)
        fl = torch.tensor(spec["forward_labels"], dtype=torch.int64)
        assert ncls in spec["forward_labels"]
        fout = transformer(fin, timestep=ft, class_labels=fl).sample
        exp["forward_input"] = fin
        exp["forward_timestep"] = ft.float()
        exp["forward_labels"] = fl.float()
        exp["forward_output"] = fout

        # DDIM, with guidance
        ddim_lat = sample_latents(transformer, ddim, noise, labels, gs, steps)
        exp["ddim_latents"] = ddim_lat
        exp["ddim_timesteps"] = ddim.timesteps.float()

        # DPM-Solver++ 2M built as the diffusers docs do it
        dpm = DPMSolverMultistepScheduler.from_config(ddim.config)
        exp["dpm_latents"] = sample_latents(transformer, dpm, noise, labels, gs, steps)
        dpm.set_timesteps(steps)
        exp["dpm_timesteps"] = dpm.timesteps.float()
        dpm_sigmas = dpm.sigmas.clone()

        if spec.get("nocfg"):
            exp["ddim_latents_nocfg"] = sample_latents(transformer, ddim, noise, labels, 1.0, steps)

        # VAE decode of the DDIM result
        sf = vae.config.scaling_factor
        vae_in = (1 / sf) * ddim_lat  # as DiTPipeline writes it (x * (1/sf), not x / sf)
        vae_out = vae.decode(vae_in).sample
        exp["vae_input"] = vae_in
        exp["vae_output"] = vae_out
        exp["image"] = (vae_out / 2 + 0.5).clamp(0, 1)

    exp = {k: v.contiguous().float() for k, v in exp.items()}
    save_file(exp, ref / "expected.safetensors")

    # ---- sanity checks ----
    for k, v in exp.items():
        check_finite_nonzero(k, v)
    img = exp["image"]
    std = img.std().item()
    frac_sat = ((img <= 0) | (img >= 1)).float().mean().item()
    vo = exp["vae_output"]
    print(f"   vae_output mean {vo.mean():.3f} std {vo.std():.3f} min {vo.min():.3f} max {vo.max():.3f}; vae_input std {exp['vae_input'].std():.1f}; dpm_latents std {exp['dpm_latents'].std():.2f}")
    print(f"   forward_output std {fout.std():.3f}  ddim_latents std {ddim_lat.std():.3f}  image mean {img.mean():.3f} std {std:.3f} saturated {frac_sat:.2%}")
    assert std > 0.05, f"image std {std}"
    assert frac_sat < 0.5, f"image saturated {frac_sat}"
    assert not torch.equal(exp["ddim_latents"], exp["dpm_latents"])
    # reloading the saved directory again reproduces forward_output exactly
    t2, _, _ = load_components(fdir)
    with torch.no_grad():
        fout2 = t2(exp["forward_input"], timestep=ft, class_labels=fl).sample
    assert torch.equal(fout2, exp["forward_output"]), "reload mismatch"
    re = load_file(ref / "expected.safetensors")
    assert all(torch.equal(re[k], exp[k]) for k in exp)
    # distinct per-block embedders
    e0 = t2.transformer_blocks[0].norm1.emb.class_embedder.embedding_table.weight
    e1 = t2.transformer_blocks[1].norm1.emb.class_embedder.embedding_table.weight
    assert not torch.equal(e0, e1)
    # our loop == diffusers' DiTPipeline (null class remapped)
    def decoded(lat):
        with torch.no_grad():
            return (vae.decode((1 / vae.config.scaling_factor) * lat).sample / 2 + 0.5).clamp(0, 1)

    seed = spec["noise_seed"]
    cross_check_with_pipeline(fdir, t2, vae, DDIMScheduler.from_config(ddim.config), seed, labels, gs, steps, exp["image"])
    cross_check_with_pipeline(
        fdir, t2, vae, DPMSolverMultistepScheduler.from_config(ddim.config), seed, labels, gs, steps, decoded(exp["dpm_latents"])
    )
    if spec.get("nocfg"):
        cross_check_with_pipeline(
            fdir, t2, vae, DDIMScheduler.from_config(ddim.config), seed, labels, 1.0, steps, decoded(exp["ddim_latents_nocfg"])
        )
    print("   DiTPipeline cross-check: identical (ddim, dpm" + (", nocfg)" if spec.get("nocfg") else ")"))

    # ---- case.json and run configs ----
    case = {
        "description": spec["description"],
        "class_labels": labels,
        "images": images,
        "class_null": ncls,
        "steps": steps,
        "guidance_scale": gs,
        "guidance_scale_nocfg": 1.0 if spec.get("nocfg") else None,
        "scheduler_config": spec["scheduler_config"],
        "schedulers": {
            "ddim_latents": "DDIMScheduler from scheduler/scheduler_config.json, eta=0",
            "dpm_latents": "DPMSolverMultistepScheduler.from_config(ddim.config) (DPM-Solver++ 2M, diffusers defaults)",
        },
        "ddim_config_effective": {k: v for k, v in ddim.config.items() if not k.startswith("_")},
        "dpm_config_effective": {k: v for k, v in dpm.config.items() if not k.startswith("_")},
        "dpm_sigmas": dpm_sigmas.tolist(),
        "noise": f"torch.randn({list(noise.shape)}, generator=torch.Generator().manual_seed({spec['noise_seed']})); "
        "ditgen draws its own noise (Philox) so tests must inject noise.safetensors",
        "forward": {
            "timesteps": spec["forward_timesteps"],
            "labels": spec["forward_labels"],
            "input": f"torch.randn({list(fin.shape)}, generator=torch.Generator().manual_seed({spec['noise_seed'] + 100}))",
        },
        "storage_dtypes": {"transformer": str(spec["transformer_dtype"]), "vae": str(spec["vae_dtype"])},
        "compute_dtype": "float32 (weights loaded from this directory and upcast)",
        "shapes": {k: list(v.shape) for k, v in exp.items()},
        "versions": {"diffusers": diffusers.__version__, "torch": torch.__version__, "python": sys.version.split()[0]},
        "notes": spec["notes"]
        + [
            "class_null = num_embeds_ada_norm (DiTPipeline hardcodes 1000, valid only for ImageNet models).",
            "ddim_latents/dpm_latents are the final latents BEFORE 1/scaling_factor; vae_input = (1 / scaling_factor) * ddim_latents (float32 multiply by the rounded reciprocal, as DiTPipeline does; differs from a division in the last bit).",
            "image = (vae_output / 2 + 0.5).clamp(0, 1), NCHW float32.",
            "Guidance mixes only the first in_channels output channels; learned-sigma channels are dropped when out_channels // 2 == in_channels.",
            "The schedulers step on the doubled [cond; uncond] batch; the two halves are re-synced to the first half before every forward.",
            SCHED_NOTES[spec["scheduler_config"]],
            f"DPM timestep_spacing here: {dpm.config.timestep_spacing!r}; timesteps are rounded with numpy round-half-to-even "
            "(linspace(0, 999, steps + 1): 832.5 -> 832, 499.5 -> 500, 166.5 -> 166), then reversed, last (0) dropped.",
            "DPM: first step and last step are first order (lower_order_final, final_sigmas_type 'zero': the last step goes to sigma 0, "
            "i.e. returns the x0 prediction); the others 2nd-order midpoint DPM-Solver++ on the data prediction.",
            "DDIM: eta 0, set_alpha_to_one true (prev timestep < 0 uses alpha_cumprod 1), clip_sample false.",
            "Latents are large (std tens to hundreds): a random model's eps is not the noise, so the x0 predictions at high t "
            "are amplified by 1/sqrt(alpha_cumprod).  Compare with relative tolerances.",
        ],
    }
    with open(ref / "case.json", "w") as f:
        json.dump(case, f, indent=2)
        f.write("\n")
    for sched_name, tag in (("ddim", "ddim"), ("dpmpp_2m", "dpm")):
        run = {
            "model": {"path": rel, "dtype": "float32"},
            "generate": {
                "class_labels": labels,
                "seed": 0,
                "steps": steps,
                "guidance_scale": gs,
                "scheduler": sched_name,
                "batch_size": images,
            },
            "output": {"path": f"out/fixtures/{spec['name']}_{tag}.png", "format": "png"},
        }
        with open(ref / f"run_{tag}.json", "w") as f:
            json.dump(run, f, indent=2)
            f.write("\n")
    return fdir


SCHED_NOTES = {
    "published": "scheduler/scheduler_config.json is facebook/DiT-XL-2-256's file verbatim (no timestep_spacing): DDIM uses "
    "its default 'leading'; DPMSolverMultistepScheduler.from_config(ddim.config) does not inherit defaulted keys "
    "(diffusers' _use_default_values) and uses its own default 'linspace'.",
    "full": "scheduler/scheduler_config.json is the full dump diffusers' save_pretrained writes for the same DDIM scheduler "
    "(every key explicit, timestep_spacing 'leading'): DPMSolverMultistepScheduler.from_config inherits 'leading'.",
}

SPECS = [
    {
        "name": "dit_odd",
        "description": "float32 DiT, 10x10 latent, patch 2 -> 5x5 = 25 tokens (odd, uneven shards), "
        "12 heads x 8, 2 layers, 10 classes, learned sigma (out_channels 8); VAE (16, 32) -> 20x20 images",
        "seed": 1234,
        "gain": 1.0,
        "noise_seed": 42,
        "transformer": dict(
            sample_size=10,
            patch_size=2,
            in_channels=4,
            out_channels=8,
            num_attention_heads=12,
            attention_head_dim=8,
            num_layers=2,
            num_embeds_ada_norm=10,
            norm_elementwise_affine=False,
            norm_eps=1e-5,
            attention_bias=True,
            activation_fn="gelu-approximate",
            norm_type="ada_norm_zero",
        ),
        "transformer_dtype": torch.float32,
        "vae": dict(block_out_channels=(16, 32), norm_num_groups=8, sample_size=20),
        "vae_dtype": torch.float32,
        "scheduler_config": "published",
        "id2label": {
            0: "red circle, scarlet ring",
            1: "blue star",
            2: "green square",
            3: "yellow triangle",
            4: "purple hexagon",
            5: "orange oval",
            6: "black cross",
            7: "white heart, pale heart",
            8: "grey diamond",
            9: "pink spiral",
        },
        "labels": [1, 7],
        "steps": 6,
        "guidance_scale": 4.0,
        "nocfg": True,
        "forward_timesteps": [999, 500, 999, 37],
        "forward_labels": [1, 7, 10, 10],
        "notes": [
            "id2label values with ', ' hold synonyms: DiTPipeline.get_label_ids splits on ',' and strips, "
            "so 'scarlet ring' -> 0 and 'pale heart' -> 7.",
        ],
    },
    {
        "name": "dit_small_bf16",
        "description": "bfloat16 DiT sharded over several files (index json), 8x8 latent -> 4x4 tokens, "
        "4 heads x 16, 3 layers, 5 classes, no learned sigma, norm_eps 1e-6; float16 VAE (8, 16) -> 16x16 images",
        "seed": 5678,
        "gain": 1.0,
        "noise_seed": 7,
        "transformer": dict(
            sample_size=8,
            patch_size=2,
            in_channels=4,
            out_channels=4,
            num_attention_heads=4,
            attention_head_dim=16,
            num_layers=3,
            num_embeds_ada_norm=5,
            norm_elementwise_affine=False,
            norm_eps=1e-6,
            attention_bias=True,
            activation_fn="gelu-approximate",
            norm_type="ada_norm_zero",
        ),
        "transformer_dtype": torch.bfloat16,
        "shard": "200KB",
        "vae": dict(block_out_channels=(8, 16), norm_num_groups=4, sample_size=16),
        "vae_dtype": torch.float16,
        "scheduler_config": "full",
        "id2label": {0: "alpha", 1: "beta", 2: "gamma", 3: "delta", 4: "epsilon"},
        "labels": [0, 3],
        "steps": 5,
        "guidance_scale": 1.5,
        "nocfg": False,
        "forward_timesteps": [999, 500, 250, 999],
        "forward_labels": [0, 3, 5, 5],
        "notes": [
            "Weights are stored in bfloat16 (transformer) / float16 (VAE); references are float32 "
            "computations on those rounded weights.",
        ],
    },
]


def main():
    FIXTURES.mkdir(parents=True, exist_ok=True)
    total = 0
    for spec in SPECS:
        fdir = make_fixture(spec)
        size = 0
        for p in sorted(fdir.rglob("*")):
            if p.is_file():
                s = p.stat().st_size
                size += s
                print(f"   {s:>9d}  {p.relative_to(REPO).as_posix()}")
        print(f"   {size:>9d}  total {fdir.name}")
        total += size
    print(f"{total:>12d}  all fixtures")


if __name__ == "__main__":
    main()

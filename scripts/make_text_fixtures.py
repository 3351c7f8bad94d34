#!/usr/bin/env python3
"""Parity fixtures for ditgen's text-conditional models: diffusers' PixArt-α
(text-to-image) and Latte (text-to-video).

Usage (from the repository root; the venv of make_t5_encoder_fixtures.py:
torch, diffusers, transformers 4.x, safetensors, sentencepiece):

    /root/venv-t5/bin/python scripts/make_text_fixtures.py

Writes (deleting and rewriting only these three directories)

    tests/fixtures/pixart_tiny/       PixArtAlphaPipeline directory + reference/
    tests/fixtures/pixart_1024_tiny/  PixArtTransformer2DModel with the 1024
                                      models' micro-conditions, its legacy
                                      Transformer2DModel config, forward reference
    tests/fixtures/latte_tiny/        LattePipeline directory + reference/

Every model is built from its class with a tiny config and random weights
(nothing comes from a model hub). The text encoder and tokenizer of both
pipelines are tests/fixtures/t5_encoder/t5_gated (T5 v1.1, d_model 40): the
tokenizer is copied verbatim; the encoder's float16 weights are widened
exactly to float32 and saved with save_pretrained as one plain
`model.safetensors`, so transformers loads it without a variant.

All references are computed by diffusers' own pipelines, loaded back from the
directories as written, on CPU in float32 with one thread and deterministic
algorithms. Each prompt is generated alone (batch of one) with its own noise
slice. An independent transcription of each pipeline's denoising loop (the
`pipeline_notes` of case.json) is checked to reproduce the pipeline bit for
bit. Running the script twice gives byte-identical files.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import hashlib  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

torch.set_default_dtype(torch.float32)
torch.use_deterministic_algorithms(True)
torch.set_num_threads(1)

import diffusers  # noqa: E402
import safetensors  # noqa: E402
import sentencepiece  # noqa: E402
import transformers  # noqa: E402
from diffusers import (  # noqa: E402
    AutoencoderKL,
    DDIMScheduler,
    DPMSolverMultistepScheduler,
    LattePipeline,
    LatteTransformer3DModel,
    PixArtAlphaPipeline,
    PixArtTransformer2DModel,
    Transformer2DModel,
)
from diffusers.models.embeddings import get_2d_sincos_pos_embed  # noqa: E402
from diffusers.utils import logging as diffusers_logging  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from transformers import T5EncoderModel, T5Tokenizer  # noqa: E402

diffusers_logging.set_verbosity_error()
diffusers_logging.disable_progress_bar()
transformers.logging.set_verbosity_error()
transformers.logging.disable_progress_bar()

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
T5_SRC = FIXTURES / "t5_encoder" / "t5_gated"

# PixArt-alpha/PixArt-XL-2-1024-MS ships scheduler/scheduler_config.json as
# written by diffusers 0.22 for `DPMSolverMultistepScheduler()` (diffusers'
# scripts/convert_pixart_alpha_to_diffusers.py builds exactly that): every
# default of that day explicit, including the bare `-Infinity` token Python's
# json writes for lambda_min_clipped. Reconstructed here (the hub is not
# reachable); keys diffusers added later (final_sigmas_type, ...) are absent,
# so their defaults apply.
PIXART_SCHEDULER_CONFIG = {
    "_class_name": "DPMSolverMultistepScheduler",
    "_diffusers_version": "0.22.0.dev0",
    "algorithm_type": "dpmsolver++",
    "beta_end": 0.02,
    "beta_schedule": "linear",
    "beta_start": 0.0001,
    "dynamic_thresholding_ratio": 0.995,
    "euler_at_final": False,
    "lambda_min_clipped": -float("inf"),
    "lower_order_final": True,
    "num_train_timesteps": 1000,
    "prediction_type": "epsilon",
    "sample_max_value": 1.0,
    "solver_order": 2,
    "solver_type": "midpoint",
    "steps_offset": 0,
    "thresholding": False,
    "timestep_spacing": "linspace",
    "trained_betas": None,
    "use_karras_sigmas": False,
    "use_lu_lambdas": False,
    "variance_type": None,
}

# Latte: a DDIMScheduler with linear betas 1e-4 .. 0.02, clip_sample false
# (what Latte's own sampler passes: sample_t2x.py loads the scheduler with
# beta_start/beta_end/beta_schedule from configs/t2x/t2v_sample.yaml and
# clip_sample=False). Written as the full dump a recent diffusers'
# save_pretrained gives (every key explicit, timestep_spacing "leading").
# Latte's yaml also passes variance_type "learned_range"; that key is NOT
# written: DDIMScheduler keeps unknown keys in its config, and LattePipeline
# then skips the learned-sigma split and the DDIM step fails (recorded in
# case.json as `variance_type_learned_range`).
LATTE_DDIM_KWARGS = dict(beta_start=0.0001, beta_end=0.02, beta_schedule="linear", clip_sample=False,
                         num_train_timesteps=1000, prediction_type="epsilon", set_alpha_to_one=True,
                         steps_offset=0, timestep_spacing="leading")

VAE_CFG = dict(block_out_channels=(8, 8, 8, 8), norm_num_groups=4)  # 4 blocks: factor 8, 10x10 latent -> 80x80


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def randomize_(module: torch.nn.Module, gen: torch.Generator, gain: float = 1.0, norm_jitter: float = 0.1) -> None:
    """Every parameter re-drawn from `gen` (as scripts/make_fixtures.py does):
    weights randn * gain / sqrt(fan_in), biases randn * 0.05 * gain, 1-D
    '*norm*.weight' 1 + jitter * randn. Nothing zero, nothing tied; the
    scale_shift_tables ([6, D] per block, [2, D] final) get randn / sqrt(D)."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            shape = tuple(p.shape)
            parts = name.split(".")
            if p.ndim == 1 and len(parts) >= 2 and "norm" in parts[-2] and name.endswith("weight"):
                v = 1.0 + norm_jitter * torch.randn(shape, generator=gen)
            elif p.ndim == 1:
                v = 0.05 * gain * torch.randn(shape, generator=gen)
            else:
                fan_in = p[0].numel()
                v = torch.randn(shape, generator=gen) * (gain / fan_in**0.5)
            p.copy_(v.to(p.dtype))


def make_vae(seed: int) -> AutoencoderKL:
    n = len(VAE_CFG["block_out_channels"])
    vae = AutoencoderKL(
        in_channels=3, out_channels=3, latent_channels=4, block_out_channels=VAE_CFG["block_out_channels"],
        layers_per_block=1, norm_num_groups=VAE_CFG["norm_num_groups"],
        down_block_types=("DownEncoderBlock2D",) * n, up_block_types=("UpDecoderBlock2D",) * n,
        sample_size=80, scaling_factor=0.18215,
    )
    randomize_(vae, torch.Generator().manual_seed(seed))
    with torch.no_grad():  # fewer clamped pixels in the final image
        vae.decoder.conv_out.weight.mul_(0.6)
    return vae.eval()


def load_t5_f32() -> T5EncoderModel:
    """t5_gated's float16 sharded variant, widened to float32 (exact)."""
    te = T5EncoderModel.from_pretrained(str(T5_SRC / "text_encoder"), variant="fp16", dtype=torch.float32).eval()
    stored = {}
    for f in sorted((T5_SRC / "text_encoder").glob("*.safetensors")):
        stored.update(load_file(str(f)))
    sd = te.state_dict()
    for k, v in stored.items():
        assert v.dtype == torch.float16 and torch.equal(sd[k], v.float()), k
    return te


def nondegenerate(name: str, t: torch.Tensor, min_std: float = 1e-3) -> None:
    assert torch.isfinite(t).all(), f"{name}: not finite"
    assert t.float().std().item() > min_std, f"{name}: degenerate (std {t.float().std().item()})"


def rel_l2(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm((a - b).double()) / torch.linalg.vector_norm(b.double()))


def write_json(path: Path, obj) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)  # allow_nan: -Infinity as Python writes it
        f.write("\n")


def save_tensors(path: Path, tensors: dict) -> None:
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path), metadata={"format": "pt"})


def replace_tokenizer(fdir: Path) -> None:
    shutil.rmtree(fdir / "tokenizer")
    shutil.copytree(T5_SRC / "tokenizer", fdir / "tokenizer")


def check_text_encoder_saved(fdir: Path, te_src: T5EncoderModel) -> list:
    files = sorted(p.name for p in (fdir / "text_encoder").iterdir())
    assert files == ["config.json", "model.safetensors"], files
    stored = load_file(str(fdir / "text_encoder" / "model.safetensors"))
    assert all(v.dtype == torch.float32 for v in stored.values())
    sd = te_src.state_dict()
    for k, v in stored.items():
        assert torch.equal(sd[k], v), k
    return files


def versions() -> dict:
    return {"diffusers": diffusers.__version__, "torch": torch.__version__, "transformers": transformers.__version__,
            "safetensors": safetensors.__version__, "sentencepiece": sentencepiece.__version__,
            "python": sys.version.split()[0]}


def sched_effective(s) -> dict:
    return {k: v for k, v in s.config.items() if not k.startswith("_")}


class CallRecorder:
    """Wraps transformer.forward and records what each call received."""

    def __init__(self, transformer):
        self.transformer = transformer
        self.calls = []
        self.orig = transformer.forward

    def __enter__(self):
        def forward(*args, **kw):
            hs = kw.get("hidden_states", args[0] if args else None)
            ts = kw.get("timestep")
            ehs = kw.get("encoder_hidden_states")
            m = kw.get("encoder_attention_mask")
            self.calls.append({
                "hidden_states": list(hs.shape),
                "timestep_dtype": str(ts.dtype).removeprefix("torch."),
                "timestep": ts.tolist(),
                "encoder_hidden_states": list(ehs.shape),
                "encoder_attention_mask": None if m is None else {
                    "dtype": str(m.dtype).removeprefix("torch."), "shape": list(m.shape),
                    "row_sums": m.sum(-1).tolist()},
                "added_cond_kwargs": None if kw.get("added_cond_kwargs") is None else
                {k: (None if v is None else v.tolist()) for k, v in kw["added_cond_kwargs"].items()},
                "other_kwargs": sorted(k for k in kw if k not in ("hidden_states", "timestep", "encoder_hidden_states",
                                                                 "encoder_attention_mask", "added_cond_kwargs")),
            })
            return self.orig(*args, **kw)

        self.transformer.forward = forward
        return self

    def __exit__(self, *exc):
        del self.transformer.forward


def tree_listing(fdir: Path) -> list:
    out = []
    for p in sorted(fdir.rglob("*")):
        if p.is_file():
            out.append((p.relative_to(REPO).as_posix(), p.stat().st_size))
    return out


# --------------------------------------------------------------------------
# independent transcriptions of the pipelines' denoising loops
# --------------------------------------------------------------------------


@torch.no_grad()
def pixart_loop(transformer, scheduler, pe, pm, ne, nm, noise, gs, steps):
    """PixArtAlphaPipeline.__call__ steps 3..7 for one prompt, written out
    (pipeline_notes). Guidance is applied to the eps channels only, to show
    that equals the pipeline's all-channel guidance followed by the split."""
    C = transformer.config.in_channels
    ehs = torch.cat([ne, pe], 0)  # [uncond; cond]
    mask = torch.cat([nm, pm], 0)
    scheduler.set_timesteps(steps)
    latents = noise * scheduler.init_noise_sigma
    for t in scheduler.timesteps:
        x = torch.cat([latents, latents], 0)
        x = scheduler.scale_model_input(x, t)
        ts = t[None].expand(x.shape[0])  # int64
        out = transformer(x, encoder_hidden_states=ehs, encoder_attention_mask=mask, timestep=ts,
                          added_cond_kwargs={"resolution": None, "aspect_ratio": None}).sample
        eps = out[:, :C]
        u, c = eps.chunk(2)
        eps = u + gs * (c - u)
        latents = scheduler.step(eps, t, latents).prev_sample
    return latents


@torch.no_grad()
def latte_loop(transformer, scheduler, pe, ne, noise, gs, steps):
    C = transformer.config.in_channels
    ehs = torch.cat([ne, pe], 0)  # [uncond; cond], both cut to the prompt's token count
    scheduler.set_timesteps(steps)
    latents = noise * scheduler.init_noise_sigma
    for t in scheduler.timesteps:
        x = torch.cat([latents, latents], 0)
        x = scheduler.scale_model_input(x, t)
        ts = t[None].expand(x.shape[0])
        out = transformer(hidden_states=x, encoder_hidden_states=ehs, timestep=ts).sample  # no mask
        eps = out[:, :C]
        u, c = eps.chunk(2)
        eps = u + gs * (c - u)
        latents = scheduler.step(eps, t, latents).prev_sample
    return latents


# --------------------------------------------------------------------------
# A. pixart_tiny
# --------------------------------------------------------------------------

PIXART_CFG = dict(num_attention_heads=4, attention_head_dim=8, in_channels=4, out_channels=8, num_layers=2,
                  cross_attention_dim=32, caption_channels=40, sample_size=10, patch_size=2,
                  norm_type="ada_norm_single", activation_fn="gelu-approximate", attention_bias=True,
                  num_embeds_ada_norm=1000, norm_elementwise_affine=False, norm_eps=1e-6,
                  use_additional_conditions=False)
PIXART_PROMPTS = ["a red circle", "A Cat walking on the GRASS  "]
PIXART_STEPS, PIXART_GS, PIXART_MAXLEN = 4, 4.5, 16
PIX = 80  # height = width = sample_size * 8

PIXART_NOTES = [
    "Reference: diffusers.PixArtAlphaPipeline.__call__ (pipeline_pixart_alpha.py), per prompt, batch of one.",
    "1. height/width default to sample_size * vae_scale_factor; vae_scale_factor = 2 ** (len(vae.block_out_channels) - 1). "
    "use_resolution_binning (default True) snaps (height, width) to ASPECT_RATIO_{1024,512,256}_BIN and only accepts "
    "sample_size 128/64/32 (else ValueError 'Invalid sample size'); these fixtures pass use_resolution_binning=False.",
    "2. do_classifier_free_guidance = guidance_scale > 1.",
    "3. encode_prompt: text = prompt.lower().strip() (clean_caption=False); tokenizer(padding='max_length', "
    "max_length=max_sequence_length, truncation=True, add_special_tokens=True) -> ids, mask [1, L] (L = max_sequence_length, "
    "default 120); prompt_embeds = text_encoder(ids, attention_mask=mask)[0] (all L rows, padded rows included). "
    "The negative prompt (default '') is preprocessed and tokenized the same way, padded to the same L = prompt_embeds.shape[1], "
    "and encoded with its own mask. Then prompt_embeds = cat([negative_embeds, prompt_embeds]) and "
    "prompt_attention_mask = cat([negative_mask, prompt_mask]): the batch order is [uncond; cond] (not DiT's [cond; null]).",
    "4. scheduler.set_timesteps(num_inference_steps); timesteps are int64.",
    "5. latents = noise * scheduler.init_noise_sigma (1.0 for DPM-Solver++ and DDIM); shape [1, in_channels, h, w], h = height // 8.",
    "6.1 added_cond_kwargs = {resolution: None, aspect_ratio: None} unless transformer.config.sample_size == 128 (NOT "
    "use_additional_conditions): then resolution = [[height, width]] and aspect_ratio = [[height / width]] (float), "
    "repeated for both CFG halves.",
    "7. for each t in scheduler.timesteps: latent_model_input = cat([latents, latents]) (CFG); scale_model_input (identity "
    "here); current_timestep = t[None].expand(2): int64, the same t for both halves (the transformer's sinusoid casts it "
    "to float32); noise_pred = transformer(latent_model_input, encoder_hidden_states=prompt_embeds, "
    "encoder_attention_mask=prompt_attention_mask (int64 0/1, [2, L]), timestep=current_timestep, added_cond_kwargs).",
    "7a. guidance on ALL out_channels (8): uncond, text = noise_pred.chunk(2); noise_pred = uncond + guidance_scale * "
    "(text - uncond) (float32: d = text - uncond; m = gs * d; r = uncond + m).",
    "7b. learned sigma: if out_channels // 2 == in_channels: noise_pred = noise_pred.chunk(2, dim=1)[0] (the first "
    "in_channels channels are eps; the variance channels are dropped). Guidance before or after the split gives the "
    "same eps bits (elementwise), which the script checks: mixing only the eps channels reproduces the pipeline exactly.",
    "7c. latents = scheduler.step(noise_pred, t, latents)[0] on the UN-doubled batch (DiT steps the doubled one); with "
    "num_inference_steps == 1 the pipeline takes step(...)[1] (pred_original_sample) instead. DDIM gets eta=0.0 and the "
    "generator (unused at eta 0).",
    "8. output_type 'latent': latents returned as is (what expected.safetensors' latents_* hold). Otherwise image = "
    "vae.decode(latents / vae.config.scaling_factor).sample: a float32 DIVISION by float32(scaling_factor) (Latte and DiT "
    "multiply by 1 / scaling_factor instead; the bits differ), then (image * 0.5 + 0.5).clamp(0, 1) (output_type 'pt').",
    "Transformer (PixArtTransformer2DModel.forward): encoder_attention_mask [B, L] 0/1 becomes a bias (1 - mask) * -10000.0 "
    "added to the cross-attention scores (not -inf: a fully masked row would still be a softmax over -10000s); "
    "the caption projection (linear_1, GELU tanh, linear_2) is applied to all L rows; "
    "timestep -> Timesteps(256, flip_sin_to_cos=True, shift 0) = [cos, sin] -> linear_1 -> SiLU -> linear_2 = embedded_timestep "
    "[B, D]; adaln_single.linear(SiLU(embedded_timestep)) = [B, 6D] shared by every block, each block adds its own "
    "scale_shift_table [6, D] and chunks shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp; "
    "block: x += gate_msa * attn1(norm1(x) * (1 + scale_msa) + shift_msa); x += attn2(x, text) (NO norm, no modulation "
    "before the cross-attention); x += gate_mlp * ff(norm2(x) * (1 + scale_mlp) + shift_mlp); norms are LayerNorm without "
    "affine, eps norm_eps; ff = Linear(D, 4D) + GELU(tanh) + Linear(4D, D). Output: shift, scale = scale_shift_table[2, D] + "
    "embedded_timestep (the pre-SiLU embedding); norm_out (LayerNorm, eps 1e-6, no affine) * (1 + scale) + shift; proj_out; "
    "unpatchify 'nhwpqc->nchpwq'.",
    "Position embedding (PatchEmbed, not stored in the weights file): for a grid of gh x gw tokens, base_size = sample_size "
    "// patch_size, interpolation_scale = config.interpolation_scale or max(sample_size // 64, 1); pos_h = arange(gh) / "
    "(gh / base_size) / interpolation_scale, pos_w = arange(gw) / (gw / base_size) / interpolation_scale (float32); token "
    "(i, j) (row-major, j fastest) gets concat(E(pos_w[j]), E(pos_h[i])) -- the FIRST D/2 channels encode the column (w) "
    "coordinate -- with E(p) = concat(sin(p * omega), cos(p * omega)), omega_k = 1 / 10000 ** (k / (D / 4)), k < D/4, "
    "computed in float64 and rounded to float32. At the native size it is the same formula (registered buffer). "
    "reference/forward.safetensors holds both pos embeds; the script checks this formula against diffusers bit for bit.",
]


def build_pixart_dir(fdir: Path, seed: int) -> dict:
    if fdir.exists():
        shutil.rmtree(fdir)
    transformer = PixArtTransformer2DModel(**PIXART_CFG)
    randomize_(transformer, torch.Generator().manual_seed(seed))
    transformer.eval()
    vae = make_vae(seed + 1)
    te = load_t5_f32()
    tok = T5Tokenizer.from_pretrained(str(T5_SRC / "tokenizer"))
    sched = DPMSolverMultistepScheduler.from_config(PIXART_SCHEDULER_CONFIG)
    pipe = PixArtAlphaPipeline(tokenizer=tok, text_encoder=te, vae=vae, transformer=transformer, scheduler=sched)
    pipe.save_pretrained(fdir, safe_serialization=True)
    write_json(fdir / "scheduler" / "scheduler_config.json", PIXART_SCHEDULER_CONFIG)
    replace_tokenizer(fdir)
    te_files = check_text_encoder_saved(fdir, te)
    for n, p in transformer.named_parameters():
        assert p.abs().max().item() > 0, f"all-zero parameter {n}"
    return {"text_encoder_files": te_files}


def load_pixart(fdir: Path) -> PixArtAlphaPipeline:
    pipe = PixArtAlphaPipeline.from_pretrained(fdir)
    pipe.set_progress_bar_config(disable=True)
    assert isinstance(pipe.transformer, PixArtTransformer2DModel)
    for m in (pipe.transformer, pipe.vae, pipe.text_encoder):
        m.eval()
        assert all(p.dtype == torch.float32 for p in m.parameters())
    return pipe


def pixart_pos_embed_formula(D, gh, gw, base_size, interp):
    """The notes' formula, independent of diffusers' code."""
    pos_h = torch.arange(gh, dtype=torch.float32) / (gh / base_size) / interp
    pos_w = torch.arange(gw, dtype=torch.float32) / (gw / base_size) / interp
    omega = 1.0 / 10000 ** (torch.arange(D // 4, dtype=torch.float64) / (D / 4))

    def E(p):
        o = p.double()[:, None] * omega[None]
        return torch.cat([torch.sin(o), torch.cos(o)], 1)

    ww = pos_w[None, :].expand(gh, gw).reshape(-1)
    hh = pos_h[:, None].expand(gh, gw).reshape(-1)
    return torch.cat([E(ww), E(hh)], 1).float()


@torch.no_grad()
def pixart_forward_reference(transformer, seed, added=None, added_8x12=None):
    """Inputs + outputs for the transformer-only parity tests."""
    cfg = transformer.config
    D = cfg.num_attention_heads * cfg.attention_head_dim
    g = torch.Generator().manual_seed(seed)
    S = cfg.sample_size
    lat = torch.randn((2, cfg.in_channels, S, S), generator=g)
    ts = torch.tensor([999.0, 321.0])
    ehs = torch.randn((2, 12, cfg.caption_channels), generator=g)
    mask = torch.zeros((2, 12), dtype=torch.int64)
    mask[0, :12] = 1
    mask[1, :5] = 1
    added = added or {"resolution": None, "aspect_ratio": None}
    out = transformer(lat, encoder_hidden_states=ehs, timestep=ts, encoder_attention_mask=mask,
                      added_cond_kwargs=added).sample
    lat2 = torch.randn((1, cfg.in_channels, 8, 12), generator=g)
    ts2 = torch.tensor([500.0])
    ehs2 = ehs[1:2].clone()
    mask2 = mask[1:2].clone()
    added2 = added_8x12 or {"resolution": None, "aspect_ratio": None}
    out2 = transformer(lat2, encoder_hidden_states=ehs2, timestep=ts2, encoder_attention_mask=mask2,
                       added_cond_kwargs=added2).sample
    assert out.shape == (2, cfg.out_channels, S, S) and out2.shape == (1, cfg.out_channels, 8, 12)
    nondegenerate("sample", out, 0.05)
    nondegenerate("sample_8x12", out2, 0.05)

    # every path matters
    out_nomask = transformer(lat, encoder_hidden_states=ehs, timestep=ts, encoder_attention_mask=torch.ones_like(mask),
                             added_cond_kwargs=added).sample
    assert torch.equal(out_nomask[0], out[0]), "row 0 has a full mask: must not change"
    assert (out_nomask[1] - out[1]).abs().max() > 1e-3, "mask has no effect"
    ehs_p = ehs.clone()
    ehs_p[:, :5] += 0.5
    d_text = (transformer(lat, encoder_hidden_states=ehs_p, timestep=ts, encoder_attention_mask=mask,
                          added_cond_kwargs=added).sample - out).abs().max()
    assert d_text > 1e-3, "text has no effect"
    ehs_pad = ehs.clone()
    ehs_pad[1, 5:] += 3.0
    assert torch.equal(transformer(lat, encoder_hidden_states=ehs_pad, timestep=ts, encoder_attention_mask=mask,
                                   added_cond_kwargs=added).sample[1], out[1]), "masked rows leak"
    d_t = (transformer(lat, encoder_hidden_states=ehs, timestep=ts.flip(0), encoder_attention_mask=mask,
                       added_cond_kwargs=added).sample - out).abs().max()
    assert d_t > 1e-3

    # position embeddings: diffusers' and the notes' formula
    pe = transformer.pos_embed
    gh, gw = S // cfg.patch_size, S // cfg.patch_size
    pos_native = pe.pos_embed[0].clone()
    pos_8x12 = get_2d_sincos_pos_embed(D, (4, 6), base_size=pe.base_size, interpolation_scale=pe.interpolation_scale,
                                       output_type="pt").float()
    assert torch.equal(pos_native, pixart_pos_embed_formula(D, gh, gw, pe.base_size, pe.interpolation_scale))
    assert torch.equal(pos_8x12, pixart_pos_embed_formula(D, 4, 6, pe.base_size, pe.interpolation_scale))

    tensors = {
        "latents": lat, "timestep": ts, "encoder_hidden_states": ehs, "encoder_attention_mask": mask, "sample": out,
        "latents_8x12": lat2, "timestep_8x12": ts2, "encoder_hidden_states_8x12": ehs2,
        "encoder_attention_mask_8x12": mask2, "sample_8x12": out2,
        "pos_embed": pos_native, "pos_embed_8x12": pos_8x12,
    }
    for k in ("resolution", "aspect_ratio"):
        if added.get(k) is not None:
            tensors[k] = added[k]
        if added2.get(k) is not None:
            tensors[k + "_8x12"] = added2[k]
    info = {
        "base_size": pe.base_size, "interpolation_scale": pe.interpolation_scale,
        "grid": [gh, gw], "grid_8x12": [4, 6],
        "text_effect_max_abs": float(d_text), "timestep_effect_max_abs": float(d_t),
        "mask_effect_max_abs_row1": float((out_nomask[1] - out[1]).abs().max()),
        "sample_std": float(out.std()), "sample_8x12_std": float(out2.std()),
    }
    return tensors, info


def make_pixart_tiny() -> Path:
    fdir = FIXTURES / "pixart_tiny"
    rel = fdir.relative_to(REPO).as_posix()
    print(f"== {rel}")
    build_info = build_pixart_dir(fdir, seed=2024)
    pipe = load_pixart(fdir)
    tr, vae = pipe.transformer, pipe.vae
    ref = fdir / "reference"
    ref.mkdir()

    # (1) transformer forward
    fwd, fwd_info = pixart_forward_reference(tr, seed=11)
    save_tensors(ref / "forward.safetensors", fwd)

    # (2) end to end, each prompt alone
    C, S = tr.config.in_channels, tr.config.sample_size
    noise = torch.randn((len(PIXART_PROMPTS), C, S, S), generator=torch.Generator().manual_seed(42))
    save_tensors(ref / "noise.safetensors", {"noise": noise})
    dpm_config = dict(pipe.scheduler.config)

    def dpm():
        return DPMSolverMultistepScheduler.from_config(dpm_config)

    def ddim():
        return DDIMScheduler.from_config(dpm_config)

    common = dict(negative_prompt="", num_inference_steps=PIXART_STEPS, guidance_scale=PIXART_GS, height=PIX,
                  width=PIX, clean_caption=False, use_resolution_binning=False, max_sequence_length=PIXART_MAXLEN)
    exp, prompts_info, observed = {}, [], {}
    lat = {"dpm": [], "ddim": []}
    images = {"dpm": [], "ddim": []}
    with torch.no_grad():
        for i, prompt in enumerate(PIXART_PROMPTS):
            pe, pm, ne, nm = pipe.encode_prompt(prompt, do_classifier_free_guidance=True, negative_prompt="",
                                                clean_caption=False, max_sequence_length=PIXART_MAXLEN)
            ids = pipe.tokenizer([prompt.lower().strip()], padding="max_length", max_length=PIXART_MAXLEN,
                                 truncation=True, add_special_tokens=True, return_tensors="pt")
            nids = pipe.tokenizer([""], padding="max_length", max_length=PIXART_MAXLEN, truncation=True,
                                  add_special_tokens=True, return_tensors="pt")
            assert torch.equal(ids.attention_mask, pm) and torch.equal(nids.attention_mask, nm)
            exp[f"prompt_embeds_{i}"] = pe[0]
            exp[f"prompt_mask_{i}"] = pm[0].to(torch.int64)
            exp[f"prompt_ids_{i}"] = ids.input_ids[0].to(torch.int64)
            exp[f"negative_embeds_{i}"] = ne[0]
            exp[f"negative_mask_{i}"] = nm[0].to(torch.int64)
            exp[f"negative_ids_{i}"] = nids.input_ids[0].to(torch.int64)
            untrunc = pipe.tokenizer([prompt.lower().strip()], add_special_tokens=True).input_ids[0]
            prompts_info.append({"raw": prompt, "processed": prompt.lower().strip(), "tokens": int(pm.sum()),
                                 "untruncated_tokens": len(untrunc), "truncated": len(untrunc) > PIXART_MAXLEN,
                                 "ids": ids.input_ids[0].tolist()})
            for tag, mk in (("dpm", dpm), ("ddim", ddim)):
                pipe.scheduler = mk()
                with CallRecorder(tr) as rec:
                    out = pipe(prompt=prompt, latents=noise[i:i + 1].clone(), output_type="latent", **common).images
                if i == 0:
                    observed[tag] = rec.calls
                lat[tag].append(out)
                # the transcription of the loop gives the same bits
                mine = pixart_loop(tr, mk(), pe, pm, ne, nm, noise[i:i + 1].clone(), PIXART_GS, PIXART_STEPS)
                assert torch.equal(mine, out), f"pixart_loop != pipeline ({tag}, prompt {i}): {(mine - out).abs().max()}"
                pipe.scheduler = mk()
                img = pipe(prompt=prompt, latents=noise[i:i + 1].clone(), output_type="pt", **common).images
                dec = vae.decode(out / vae.config.scaling_factor).sample
                assert torch.equal((dec * 0.5 + 0.5).clamp(0, 1), img), "decode formula"
                images[tag].append(img)
    for tag in ("dpm", "ddim"):
        exp[f"latents_{tag}"] = torch.cat(lat[tag], 0)
    exp["images_dpm"] = torch.cat(images["dpm"], 0)
    images_ddim = torch.cat(images["ddim"], 0)  # checked, not stored (size)
    s_dpm, s_ddim = dpm(), ddim()
    s_dpm.set_timesteps(PIXART_STEPS)
    s_ddim.set_timesteps(PIXART_STEPS)
    exp["timesteps_dpm"] = s_dpm.timesteps.float()
    exp["timesteps_ddim"] = s_ddim.timesteps.float()
    exp["vae_input_dpm"] = exp["latents_dpm"] / vae.config.scaling_factor
    for k, v in exp.items():
        if v.dtype == torch.float32 and not k.startswith(("prompt_mask", "negative_mask")):
            nondegenerate(k, v)
    save_tensors(ref / "expected.safetensors", exp)

    for tag, img in (("dpm", exp["images_dpm"]), ("ddim", images_ddim)):
        sat = ((img <= 0) | (img >= 1)).float().mean().item()
        print(f"   images_{tag} mean {img.mean():.3f} std {img.std():.3f} saturated {sat:.1%}; "
              f"latents_{tag} std {exp['latents_' + tag].std():.2f}")
        assert img.std() > 0.05 and sat < 0.5
    assert not torch.equal(exp["latents_dpm"][0], exp["latents_dpm"][1])
    # vae_input is a division, not a multiply by the reciprocal
    div_vs_mul = not torch.equal(exp["vae_input_dpm"], (1 / vae.config.scaling_factor) * exp["latents_dpm"])

    # reload and forward again: bit-identical
    pipe2 = load_pixart(fdir)
    with torch.no_grad():
        again = pipe2.transformer(fwd["latents"], encoder_hidden_states=fwd["encoder_hidden_states"],
                                  timestep=fwd["timestep"], encoder_attention_mask=fwd["encoder_attention_mask"],
                                  added_cond_kwargs={"resolution": None, "aspect_ratio": None}).sample
    assert torch.equal(again, fwd["sample"])

    case = {
        "description": "PixArtAlphaPipeline, tiny random PixArtTransformer2DModel (4 heads x 8 = 32, 2 layers, "
        "patch 2, 10x10 latent -> 5x5 = 25 tokens: odd grid, uneven shards), learned sigma (out_channels 8), "
        "caption_channels 40 = T5 d_model, no micro-conditions; VAE (8, 8, 8, 8) -> 80x80 images; "
        "T5 v1.1 text encoder (t5_gated) in float32",
        "versions": versions(),
        "text_encoder": "float32 copy of tests/fixtures/t5_encoder/t5_gated/text_encoder (its float16 weights widened "
        "exactly), written by save_pretrained as one model.safetensors (holds shared.weight); tokenizer/ is a verbatim copy "
        "of t5_gated/tokenizer",
        "text_encoder_files": build_info["text_encoder_files"],
        "transformer_config_effective": {k: v for k, v in tr.config.items() if not k.startswith("_")},
        "forward": {
            "call": "transformer(latents, encoder_hidden_states=encoder_hidden_states, timestep=timestep, "
            "encoder_attention_mask=encoder_attention_mask, added_cond_kwargs={'resolution': None, 'aspect_ratio': None}).sample",
            "call_8x12": "same with latents_8x12 [1, 4, 8, 12] (a 4 x 6 token grid: interpolated, non-square position "
            "embedding), timestep_8x12, encoder_hidden_states_8x12 (= row 1 of encoder_hidden_states), "
            "encoder_attention_mask_8x12 (= row 1 of the mask: 5 valid tokens)",
            "inputs": "torch.Generator().manual_seed(11): randn latents [2, 4, 10, 10], randn encoder_hidden_states [2, 12, 40], "
            "randn latents_8x12; timestep [999., 321.] float32 (the pipeline passes int64; the sinusoid casts to float32 "
            "either way); mask int64, prefix lengths 12 and 5",
            "pos_embed": "the [tokens, D] position embedding diffusers adds (native 5x5 grid and the 4x6 grid of the 8x12 "
            "input); not stored in the weights file",
            **fwd_info,
        },
        "pipeline": {
            "prompts": PIXART_PROMPTS, "prompt_tokens": prompts_info, "negative_prompt": "",
            "steps": PIXART_STEPS, "guidance_scale": PIXART_GS, "max_sequence_length": PIXART_MAXLEN,
            "height": PIX, "width": PIX,
            "call": "pipe(prompt=prompts[i], negative_prompt='', num_inference_steps=4, guidance_scale=4.5, height=80, "
            "width=80, latents=noise[i:i+1], output_type='latent' (latents_*) or 'pt' (images_dpm; the DDIM images are checked but not stored), clean_caption=False, "
            "use_resolution_binning=False, max_sequence_length=16), one call per prompt (batch of one)",
            "schedulers": {
                "dpm": "the pipeline's own scheduler: DPMSolverMultistepScheduler from scheduler/scheduler_config.json "
                "(ditgen 'dpmpp_2m')",
                "ddim": "DDIMScheduler.from_config(dpm.config) (ditgen 'ddim'), eta 0",
            },
            "encode_call": "pipe.encode_prompt(prompts[i], do_classifier_free_guidance=True, negative_prompt='', "
            "clean_caption=False, max_sequence_length=16) -> prompt_embeds_i, prompt_mask_i, negative_embeds_i, negative_mask_i",
            "noise": "torch.randn([2, 4, 10, 10], generator=torch.Generator().manual_seed(42)); row i is prompt i's "
            "initial latents",
            "dpm_config_effective": sched_effective(s_dpm),
            "ddim_config_effective": sched_effective(s_ddim),
            "timesteps_dpm": s_dpm.timesteps.tolist(),
            "timesteps_ddim": s_ddim.timesteps.tolist(),
            "dpm_sigmas": s_dpm.sigmas.tolist(),
            "observed_transformer_calls_prompt0": observed,
        },
        "shapes": {k: [list(v.shape), str(v.dtype).removeprefix("torch.")] for k, v in exp.items()},
        "pipeline_notes": PIXART_NOTES,
        "notes": [
            "Batch order under CFG is [negative; prompt] = [uncond; cond] for PixArt and Latte (DESIGN.md section 4 says "
            "diffusers orders [cond, uncond]: that is DiT's label order, not the text pipelines').",
            "CFG is applied on all 8 output channels before the learned-sigma split; only the 4 eps channels reach the "
            "scheduler, so mixing only those gives identical bits (checked).",
            "The scheduler steps on the un-doubled latents [1, 4, h, w] (DiT steps the doubled batch).",
            "The negative prompt '' is 1 token (EOS) padded to max_sequence_length; its padded rows are encoded by T5 "
            "(pad queries attend to the EOS key) and passed on, but the cross-attention mask hides them (bias -10000: "
            "exp underflows to exactly 0 in float32, checked: changing masked rows does not change the output bits).",
            "DDIMScheduler.from_config(PixArt's DPM config) keeps the explicit timestep_spacing 'linspace' and takes DDIM's "
            "own defaults for the keys the DPM file lacks: clip_sample TRUE (clip_sample_range 1.0: x0 clipped to [-1, 1] "
            "every step), set_alpha_to_one true. DDIM linspace timesteps are linspace(0, 999, steps).round()[::-1] = "
            f"{s_ddim.timesteps.tolist()} but DDIM's step still goes to prev_t = t - 1000 // steps (999 -> 749, ...; "
            "the last goes below 0 -> alpha_cumprod 1), a diffusers quirk to copy.",
            "DPM (PixArt's file): linspace spacing, timesteps np.linspace(0, 999, steps + 1).round()[::-1][:-1] = "
            f"{s_dpm.timesteps.tolist()}; dpmsolver++ midpoint, lower_order_final, final_sigmas_type 'zero' (default: the "
            "last step returns the x0 prediction).",
            "scheduler/scheduler_config.json contains the bare token -Infinity (lambda_min_clipped), as the real PixArt "
            "file does.",
            f"vae input: latents / scaling_factor (division; differs from (1 / sf) * latents in some bits: {div_vs_mul}). "
            "vae_input_dpm holds the divided latents for a stage-wise check.",
            "images_dpm is NCHW float32 in [0, 1]: (vae.decode(...).sample * 0.5 + 0.5).clamp(0, 1).",
            "Latents are large (a random model's eps is not noise); compare with relative tolerances.",
            "max_sequence_length 16 < the pipeline default 120; ditgen's run configs set generate.max_sequence_length 16.",
        ],
    }
    write_json(ref / "case.json", case)
    for sched_name, tag in (("ddim", "ddim"), ("dpmpp_2m", "dpm")):
        run = {
            "model": {"path": rel, "dtype": "float32"},
            "generate": {
                "prompts": PIXART_PROMPTS, "negative_prompt": "", "height": PIX, "width": PIX,
                "max_sequence_length": PIXART_MAXLEN, "seed": 0, "steps": PIXART_STEPS,
                "guidance_scale": PIXART_GS, "scheduler": sched_name, "batch_size": len(PIXART_PROMPTS),
            },
            "output": {"path": f"out/fixtures/pixart_tiny_{tag}.png", "format": "png"},
        }
        write_json(ref / f"run_{tag}.json", run)
    return fdir


# --------------------------------------------------------------------------
# B. pixart_1024_tiny
# --------------------------------------------------------------------------

PIXART_1024_CFG = dict(PIXART_CFG, attention_head_dim=6, cross_attention_dim=24, use_additional_conditions=True,
                       interpolation_scale=2)


def legacy_config(cfg: dict) -> dict:
    """The transformer/config.json form of the published PixArt-XL-2-1024-MS
    (diffusers 0.22: `Transformer2DModel` + ada_norm_single, with the
    Transformer2DModel-only keys), for this fixture's sizes. The published
    1024 file has neither use_additional_conditions nor interpolation_scale:
    it derives both from sample_size 128; this tiny model (sample_size 10)
    states them."""
    out = {
        "_class_name": "Transformer2DModel",
        "_diffusers_version": "0.22.0.dev0",
        "activation_fn": cfg["activation_fn"],
        "attention_bias": cfg["attention_bias"],
        "attention_head_dim": cfg["attention_head_dim"],
        "attention_type": "default",
        "caption_channels": cfg["caption_channels"],
        "cross_attention_dim": cfg["cross_attention_dim"],
        "double_self_attention": False,
        "dropout": 0.0,
        "in_channels": cfg["in_channels"],
        "interpolation_scale": cfg["interpolation_scale"],
        "norm_elementwise_affine": cfg["norm_elementwise_affine"],
        "norm_eps": cfg["norm_eps"],
        "norm_num_groups": 32,
        "norm_type": "ada_norm_single",
        "num_attention_heads": cfg["num_attention_heads"],
        "num_embeds_ada_norm": cfg["num_embeds_ada_norm"],
        "num_layers": cfg["num_layers"],
        "num_vector_embeds": None,
        "only_cross_attention": False,
        "out_channels": cfg["out_channels"],
        "patch_size": cfg["patch_size"],
        "sample_size": cfg["sample_size"],
        "upcast_attention": False,
        "use_additional_conditions": cfg["use_additional_conditions"],
        "use_linear_projection": False,
    }
    return out


def make_pixart_1024_tiny() -> Path:
    fdir = FIXTURES / "pixart_1024_tiny"
    print(f"== {fdir.relative_to(REPO).as_posix()}")
    if fdir.exists():
        shutil.rmtree(fdir)
    tr = PixArtTransformer2DModel(**PIXART_1024_CFG)
    randomize_(tr, torch.Generator().manual_seed(1024))
    tr.eval()
    tr.save_pretrained(fdir / "transformer", safe_serialization=True)
    (fdir / "transformer_legacy").mkdir()
    legacy = legacy_config(PIXART_1024_CFG)
    write_json(fdir / "transformer_legacy" / "config.json", legacy)

    tr = PixArtTransformer2DModel.from_pretrained(fdir / "transformer").eval()
    assert tr.use_additional_conditions and tr.adaln_single.emb.use_additional_conditions
    added = {"resolution": torch.tensor([[80.0, 80.0], [80.0, 96.0]]), "aspect_ratio": torch.tensor([[1.0], [1.2]])}
    added2 = {"resolution": torch.tensor([[64.0, 96.0]]), "aspect_ratio": torch.tensor([[64.0 / 96.0]])}
    fwd, info = pixart_forward_reference(tr, seed=12, added=added, added_8x12=added2)
    with torch.no_grad():
        other = {"resolution": torch.tensor([[80.0, 80.0], [96.0, 80.0]]), "aspect_ratio": added["aspect_ratio"]}
        d_res = (tr(fwd["latents"], encoder_hidden_states=fwd["encoder_hidden_states"], timestep=fwd["timestep"],
                    encoder_attention_mask=fwd["encoder_attention_mask"], added_cond_kwargs=other).sample
                 - fwd["sample"])[1].abs().max()
    assert d_res > 1e-3, "resolution has no effect"
    info["resolution_effect_max_abs_row1 (80x96 -> 96x80)"] = float(d_res)
    ref = fdir / "reference"
    ref.mkdir()
    save_tensors(ref / "forward.safetensors", fwd)

    # the legacy config loads as PixArtTransformer2DModel and gives the same bits
    legacy_results = {}
    with tempfile.TemporaryDirectory() as tmp:
        tdir = Path(tmp) / "transformer"
        tdir.mkdir()
        shutil.copy(fdir / "transformer_legacy" / "config.json", tdir / "config.json")
        shutil.copy(fdir / "transformer" / "diffusion_pytorch_model.safetensors", tdir)
        for loader in (Transformer2DModel, PixArtTransformer2DModel):
            m = loader.from_pretrained(tdir).eval()
            assert type(m) is PixArtTransformer2DModel, type(m)
            with torch.no_grad():
                o = m(fwd["latents"], encoder_hidden_states=fwd["encoder_hidden_states"], timestep=fwd["timestep"],
                      encoder_attention_mask=fwd["encoder_attention_mask"], added_cond_kwargs=added).sample
                o2 = m(fwd["latents_8x12"], encoder_hidden_states=fwd["encoder_hidden_states_8x12"],
                       timestep=fwd["timestep_8x12"], encoder_attention_mask=fwd["encoder_attention_mask_8x12"],
                       added_cond_kwargs=added2).sample
            assert torch.equal(o, fwd["sample"]) and torch.equal(o2, fwd["sample_8x12"])
            legacy_results[f"{loader.__name__}.from_pretrained"] = f"{type(m).__name__}, identical sample and sample_8x12"
    print("   legacy config: loads as PixArtTransformer2DModel, identical outputs")

    case = {
        "description": "PixArtTransformer2DModel with the 1024 models' micro-conditions (use_additional_conditions "
        "true, explicitly: sample_size is 10, not 128) and interpolation_scale 2 (what PixArt-1024 derives from "
        "sample_size 128); 4 heads x 6 = 24 (the micro-condition embedders are D // 3 wide each, so D must divide "
        "by 3: 32 fails in diffusers with a shape error), 2 layers, learned sigma, caption_channels 40. "
        "Transformer only (no pipeline): forward parity.",
        "versions": versions(),
        "transformer_config_effective": {k: v for k, v in tr.config.items() if not k.startswith("_")},
        "legacy_config": "transformer_legacy/config.json: the same model as `_class_name: Transformer2DModel` + "
        "`norm_type: ada_norm_single` (the form the published PixArt-XL-2-1024-MS uses), with the legacy-only keys "
        "(norm_num_groups, num_vector_embeds, only_cross_attention, double_self_attention, use_linear_projection, "
        "upcast_attention). Only config.json is stored: pair it with transformer/diffusion_pytorch_model.safetensors.",
        "legacy_check": legacy_results,
        "forward": {
            "call": "transformer(latents, encoder_hidden_states=..., timestep=..., encoder_attention_mask=..., "
            "added_cond_kwargs={'resolution': resolution, 'aspect_ratio': aspect_ratio}).sample",
            "call_8x12": "same with latents_8x12 [1, 4, 8, 12], resolution_8x12 [[64, 96]], aspect_ratio_8x12 [[64/96]]",
            "inputs": "torch.Generator().manual_seed(12): randn latents [2, 4, 10, 10], encoder_hidden_states [2, 12, 40], "
            "latents_8x12; timestep [999., 321.], timestep_8x12 [500.]; mask int64 prefix lengths 12 and 5; resolution "
            "[[80, 80], [80, 96]] (height, width), aspect_ratio [[1.0], [1.2]]",
            **info,
        },
        "shapes": {k: [list(v.shape), str(v.dtype).removeprefix("torch.")] for k, v in fwd.items()},
        "notes": [
            "Micro-conditions (PixArtAlphaCombinedTimestepSizeEmbeddings): c = timestep_embedder([cos, sin] sinusoid of t) "
            "+ cat(resolution_embedder(sinusoid(h)), resolution_embedder(sinusoid(w)), aspect_ratio_embedder(sinusoid(ar))) "
            "along channels, each D // 3 wide; the sinusoid is Timesteps(256, flip_sin_to_cos=True, shift 0) applied to "
            "resolution.flatten() ([B*2]: h then w per row) and aspect_ratio.flatten(); both resolution entries use the "
            "SAME resolution_embedder. embedded_timestep = c feeds adaln_single.linear (after SiLU) and the final "
            "scale_shift_table (without SiLU).",
            "PixArtAlphaPipeline only builds resolution / aspect_ratio when transformer.config.sample_size == 128 "
            "(resolution = [height, width] in pixels, aspect_ratio = height / width, after resolution binning); with "
            "any other sample_size it passes None, which a use_additional_conditions model rejects. This fixture is "
            "therefore forward-only.",
            "interpolation_scale 2: pos = arange(g) / (g / base_size) / 2 (half-step positions at the native size).",
            "diffusers maps `Transformer2DModel` + norm_type ada_norm_single to PixArtTransformer2DModel "
            "(_CLASS_REMAPPING_DICT in models/model_loading_utils.py); ada_norm_zero maps to DiTTransformer2DModel.",
        ],
    }
    write_json(ref / "case.json", case)
    return fdir


# --------------------------------------------------------------------------
# C. latte_tiny
# --------------------------------------------------------------------------

LATTE_CFG = dict(num_attention_heads=4, attention_head_dim=8, in_channels=4, out_channels=8, num_layers=2,
                 cross_attention_dim=32, caption_channels=40, sample_size=10, patch_size=2, video_length=3,
                 norm_type="ada_norm_single", activation_fn="gelu-approximate", attention_bias=True,
                 num_embeds_ada_norm=1000, norm_elementwise_affine=False, norm_eps=1e-6)
LATTE_PROMPTS = ["a red circle moving left", "a cat"]
LATTE_STEPS, LATTE_GS, LATTE_F = 3, 7.5, 3

LATTE_NOTES = [
    "Reference: diffusers.LattePipeline.__call__ (pipeline_latte.py), per prompt, batch of one.",
    "0. decode_chunk_size defaults to 14 (None -> video_length).",
    "1. height/width: the call's (defaults 512, not sample_size * 8); video_length default 16 (not the config's).",
    "2. do_classifier_free_guidance = guidance_scale > 1.",
    "3. encode_prompt: text = prompt.lower().strip() (clean_caption=False); max_length is HARD-CODED 120 (LattePipeline "
    "has no max_sequence_length argument: passing one raises TypeError); tokenizer(padding='max_length', max_length=120, "
    "truncation=True, add_special_tokens=True) -> ids, mask; prompt_embeds = text_encoder(ids, attention_mask=mask)[0] "
    "[1, 120, D]. The negative prompt (default '') is tokenized padded to 120 and encoded with its own mask. "
    "mask_feature=True (default) with a batch of one: k = mask.sum() (the prompt's pieces + EOS); prompt_embeds = "
    "prompt_embeds[:, :k]; negative_embeds = negative_embeds[:, :k] (the first k rows of the 120-row encoding of '': the "
    "EOS row and k - 1 padded rows, which are NOT masked later). With a batch > 1 it instead multiplies the prompt rows "
    "by their mask and keeps 120 rows (and the negative's 120 rows unmasked): a batch of prompts does not reproduce the "
    "batch-of-one results. prompt_embeds = cat([negative_embeds, prompt_embeds]) -> [2, k, D]: order [uncond; cond].",
    "4. scheduler.set_timesteps(num_inference_steps); int64 timesteps.",
    "5. latents = noise * init_noise_sigma (1.0 for DDIM), shape [1, C, video_length, height // 8, width // 8] "
    "([B, C, F, h, w]).",
    "7. for each t: latent_model_input = cat([latents, latents]); scale_model_input (identity); current_timestep = "
    "t[None].expand(2) (int64); noise_pred = transformer(hidden_states=latent_model_input, encoder_hidden_states="
    "prompt_embeds, timestep=current_timestep, enable_temporal_attentions=True) -- NO encoder_attention_mask: the "
    "cross-attention sees all k rows of both halves.",
    "7a. guidance on all 8 channels: uncond, text = noise_pred.chunk(2); noise_pred = uncond + guidance_scale * (text - uncond).",
    "7b. learned sigma: UNLESS scheduler.config has variance_type in ('learned', 'learned_range'), noise_pred = "
    "noise_pred.chunk(2, dim=1)[0]. (The check reads the scheduler's config, not out_channels; DDIMScheduler keeps "
    "an unknown variance_type key in its config, and then the 8-channel eps reaches DDIM.step and fails.)",
    "7c. latents = scheduler.step(noise_pred, t, latents, eta=0.0, generator)[0] on the un-doubled latents.",
    "8. output_type 'latent': latents [1, C, F, h, w] (latents_ddim). Otherwise decode_latents: latents.permute(0, 2, 1, 3, 4)"
    ".flatten(0, 1) -> [B*F, C, h, w]; latents = 1 / scaling_factor * latents (a MULTIPLY by the reciprocal, unlike "
    "PixArt's division); vae.decode in chunks of decode_chunk_size frames (AutoencoderKL decodes each frame "
    "independently; no num_frames argument); frames.reshape(-1, video_length, 3, H, W).permute(0, 2, 1, 3, 4) -> "
    "[B, 3, F, H, W] float32; then video_processor.postprocess_video(output_type 'pt'): per video permute to "
    "[F, 3, H, W] and (x * 0.5 + 0.5).clamp(0, 1) -> output frames [B, F, 3, H, W].",
    "Transformer (LatteTransformer3DModel.forward): x [B, C, F, H, W] -> permute to [B*F, C, H, W] -> PatchEmbed "
    "(2-D sin-cos position embedding as PixArt's, base_size sample_size // patch, interpolation_scale max(sample_size // "
    "64, 1)) -> [B*F, N, D]. adaln_single(timestep) (no micro-conditions) -> [B, 6D] and embedded_timestep [B, D]. "
    "caption_projection(encoder_hidden_states) [B, k, D], repeat_interleave F times -> [B*F, k, D]; the [B, 6D] "
    "modulation is repeat_interleave'd F times for the spatial blocks and N times for the temporal blocks. Per layer i: "
    "spatial block i (PixArt's block: self-attention over the N tokens of a frame, cross-attention to the text with no "
    "mask, MLP) on [B*F, N, D]; then reshape to [B, F, N, D] -> permute -> [B*N, F, D]; if i == 0 and F > 1: add "
    "temp_pos_embed [1, video_length, D] (broadcast: F must equal video_length); temporal block i (same block type "
    "without cross-attention: self-attention over the F frames of a token, MLP; its own scale_shift_table, the same "
    "[B, 6D] modulation); back to [B*F, N, D]. Output: shift, scale = scale_shift_table + embedded_timestep (repeated "
    "per frame), norm_out, modulate, proj_out, unpatchify, reshape to [B, F, C_out, H, W] and permute to [B, C_out, F, H, W].",
    "temp_pos_embed (not in the weights file): get_1d_sincos_pos_embed_from_grid(D, arange(video_length)): row f = "
    "concat(sin(f * omega), cos(f * omega)), omega_k = 1 / 10000 ** (k / (D / 2)), k < D/2, float64 -> float32. "
    "reference/forward.safetensors holds it (temp_pos_embed) and the spatial pos_embed.",
]


def make_latte_tiny() -> Path:
    fdir = FIXTURES / "latte_tiny"
    rel = fdir.relative_to(REPO).as_posix()
    print(f"== {rel}")
    if fdir.exists():
        shutil.rmtree(fdir)
    transformer = LatteTransformer3DModel(**LATTE_CFG)
    randomize_(transformer, torch.Generator().manual_seed(3003))
    transformer.eval()
    for n, p in transformer.named_parameters():
        assert p.abs().max().item() > 0, f"all-zero parameter {n}"
    vae = make_vae(3004)
    te = load_t5_f32()
    tok = T5Tokenizer.from_pretrained(str(T5_SRC / "tokenizer"))
    sched = DDIMScheduler(**LATTE_DDIM_KWARGS)
    pipe = LattePipeline(tokenizer=tok, text_encoder=te, vae=vae, transformer=transformer, scheduler=sched)
    pipe.save_pretrained(fdir, safe_serialization=True)
    replace_tokenizer(fdir)
    te_files = check_text_encoder_saved(fdir, te)
    saved_sched = json.loads((fdir / "scheduler" / "scheduler_config.json").read_text())
    assert saved_sched["clip_sample"] is False and saved_sched["timestep_spacing"] == "leading"

    pipe = LattePipeline.from_pretrained(fdir)
    pipe.set_progress_bar_config(disable=True)
    tr, vae = pipe.transformer, pipe.vae
    for m in (tr, vae, pipe.text_encoder):
        m.eval()
    ref = fdir / "reference"
    ref.mkdir()
    cfg = tr.config
    D = cfg.num_attention_heads * cfg.attention_head_dim

    # ---- forward ----
    g = torch.Generator().manual_seed(13)
    lat = torch.randn((2, cfg.in_channels, LATTE_F, cfg.sample_size, cfg.sample_size), generator=g)
    ts = torch.tensor([999.0, 321.0])
    ehs = torch.randn((2, 12, cfg.caption_channels), generator=g)
    lat_f1 = torch.randn((2, cfg.in_channels, 1, cfg.sample_size, cfg.sample_size), generator=g)
    fwd_info = {}
    with torch.no_grad():
        out = tr(lat, timestep=ts, encoder_hidden_states=ehs).sample
        out_f1 = tr(lat_f1, timestep=ts, encoder_hidden_states=ehs).sample
        assert out.shape == (2, cfg.out_channels, LATTE_F, cfg.sample_size, cfg.sample_size)
        nondegenerate("latte sample", out, 0.05)
        nondegenerate("latte sample_f1", out_f1, 0.05)
        # frames interact (temporal attention): changing frame 2 changes frame 0
        lat_p = lat.clone()
        lat_p[:, :, 2] += 1.0
        d_temporal = (tr(lat_p, timestep=ts, encoder_hidden_states=ehs).sample - out)[:, :, 0].abs().max()
        assert d_temporal > 1e-3, "temporal path has no effect"
        ehs_p = ehs.clone()
        ehs_p[:, 7:] += 0.5
        d_text = (tr(lat, timestep=ts, encoder_hidden_states=ehs_p).sample - out).abs().max()
        assert d_text > 1e-3
        # frame-count support
        frame_support = {"1": "works (temp_pos_embed is skipped when F == 1): sample_f1", str(LATTE_F): "works: sample"}
        for F in (2, 5):
            x = torch.randn((2, cfg.in_channels, F, cfg.sample_size, cfg.sample_size), generator=torch.Generator().manual_seed(F))
            try:
                tr(x, timestep=ts, encoder_hidden_states=ehs)
                frame_support[str(F)] = "works"
            except Exception as e:  # noqa: BLE001
                frame_support[str(F)] = f"{type(e).__name__}: {e}"
        # a [B, L] encoder_attention_mask is not converted to a bias by Latte's forward
        mask = torch.ones((2, 12), dtype=torch.int64)
        mask[1, 5:] = 0
        try:
            tr(lat, timestep=ts, encoder_hidden_states=ehs, encoder_attention_mask=mask)
            mask_behaviour = "accepted"
        except Exception as e:  # noqa: BLE001
            mask_behaviour = f"{type(e).__name__}: {e}"
    print(f"   frames: {frame_support}")
    tpe = tr.temp_pos_embed[0].clone()
    omega = 1.0 / 10000 ** (torch.arange(D // 2, dtype=torch.float64) / (D / 2))
    o = torch.arange(cfg.video_length, dtype=torch.float64)[:, None] * omega[None]
    assert torch.equal(tpe, torch.cat([torch.sin(o), torch.cos(o)], 1).float()), "temp_pos_embed formula"
    pos = tr.pos_embed.pos_embed[0].clone()
    assert torch.equal(pos, pixart_pos_embed_formula(D, 5, 5, tr.pos_embed.base_size, tr.pos_embed.interpolation_scale))
    fwd = {"latents": lat, "timestep": ts, "encoder_hidden_states": ehs, "sample": out,
           "latents_f1": lat_f1, "sample_f1": out_f1, "temp_pos_embed": tpe, "pos_embed": pos}
    save_tensors(ref / "forward.safetensors", fwd)

    # ---- end to end ----
    C, S = cfg.in_channels, cfg.sample_size
    noise = torch.randn((len(LATTE_PROMPTS), C, LATTE_F, S, S), generator=torch.Generator().manual_seed(43))
    save_tensors(ref / "noise.safetensors", {"noise": noise})
    ddim_config = dict(pipe.scheduler.config)
    common = dict(negative_prompt="", num_inference_steps=LATTE_STEPS, guidance_scale=LATTE_GS, video_length=LATTE_F,
                  height=PIX, width=PIX, clean_caption=False, mask_feature=True)
    exp, prompts_info, observed = {}, [], None
    lats, frames = [], []
    with torch.no_grad():
        for i, prompt in enumerate(LATTE_PROMPTS):
            pe, ne = pipe.encode_prompt(prompt, do_classifier_free_guidance=True, negative_prompt="",
                                        clean_caption=False, mask_feature=True)
            enc = pipe.tokenizer([prompt.lower().strip()], padding="max_length", max_length=120, truncation=True,
                                 add_special_tokens=True, return_tensors="pt")
            k = int(enc.attention_mask.sum())
            assert pe.shape == (1, k, cfg.caption_channels) and ne.shape == (1, k, cfg.caption_channels)
            # T5 on the k tokens alone (no padding) vs the pipeline's 120-padded run
            short = pipe.text_encoder(enc.input_ids[:, :k], attention_mask=enc.attention_mask[:, :k])[0]
            nenc = pipe.tokenizer([""], padding="max_length", max_length=120, truncation=True,
                                  add_special_tokens=True, return_tensors="pt")
            nshort = pipe.text_encoder(nenc.input_ids[:, :k], attention_mask=nenc.attention_mask[:, :k])[0]
            exp[f"prompt_embeds_{i}"] = pe[0]
            exp[f"prompt_ids_{i}"] = enc.input_ids[0, :k].to(torch.int64)
            exp[f"negative_embeds_{i}"] = ne[0]
            exp[f"negative_ids_{i}"] = nenc.input_ids[0, :k].to(torch.int64)
            prompts_info.append({
                "raw": prompt, "processed": prompt.lower().strip(), "tokens_k": k,
                "ids": enc.input_ids[0, :k].tolist(),
                "prompt_embeds_120_vs_k_tokens_max_abs": float((short - pe).abs().max()),
                "negative_embeds_120_vs_k_tokens_max_abs": float((nshort - ne).abs().max()),
            })
            with CallRecorder(tr) as rec:
                out_lat = pipe(prompt=prompt, latents=noise[i:i + 1].clone(), output_type="latent", **common).frames
            if i == 0:
                observed = rec.calls
            mine = latte_loop(tr, DDIMScheduler.from_config(ddim_config), pe, ne, noise[i:i + 1].clone(),
                              LATTE_GS, LATTE_STEPS)
            assert torch.equal(mine, out_lat), f"latte_loop != pipeline: {(mine - out_lat).abs().max()}"
            vid = pipe(prompt=prompt, latents=noise[i:i + 1].clone(), output_type="pt", **common).frames
            assert vid.shape == (1, LATTE_F, 3, PIX, PIX), vid.shape
            x = (1 / vae.config.scaling_factor * out_lat).permute(0, 2, 1, 3, 4).flatten(0, 1)
            dec = vae.decode(x).sample  # [F, 3, H, W]
            assert torch.equal((dec * 0.5 + 0.5).clamp(0, 1), vid[0]), "decode formula"
            lats.append(out_lat)
            frames.append(vid)
        # what the pipeline does with other arguments
        errors = {}
        try:
            pipe(prompt=LATTE_PROMPTS[1], latents=noise[1:2].clone(), output_type="latent", max_sequence_length=16,
                 **common)
            errors["max_sequence_length=16"] = "accepted"
        except Exception as e:  # noqa: BLE001
            errors["max_sequence_length=16"] = f"{type(e).__name__}: {e}"
        bad = DDIMScheduler.from_config({**ddim_config, "variance_type": "learned_range"})
        pipe.scheduler = bad
        try:
            pipe(prompt=LATTE_PROMPTS[1], latents=noise[1:2].clone(), output_type="latent", **common)
            errors["variance_type_learned_range"] = "accepted"
        except Exception as e:  # noqa: BLE001
            errors["variance_type_learned_range"] = f"{type(e).__name__}: {e}"
        pipe.scheduler = DDIMScheduler.from_config(ddim_config)
        # batch of two prompts (not the ditgen contract): mask_feature keeps 120 rows and multiplies by the mask
        both = pipe(prompt=LATTE_PROMPTS, latents=noise.clone(), output_type="latent", **common).frames
        batch_vs_single = rel_l2(both, torch.cat(lats, 0))
    exp["latents_ddim"] = torch.cat(lats, 0)
    exp["frames_ddim"] = torch.cat(frames, 0)
    s = DDIMScheduler.from_config(ddim_config)
    s.set_timesteps(LATTE_STEPS)
    exp["timesteps_ddim"] = s.timesteps.float()
    exp["vae_input_ddim"] = (1 / vae.config.scaling_factor * exp["latents_ddim"])
    for kk, v in exp.items():
        if v.dtype == torch.float32:
            nondegenerate(kk, v)
    fr = exp["frames_ddim"]
    sat = ((fr <= 0) | (fr >= 1)).float().mean().item()
    print(f"   frames_ddim mean {fr.mean():.3f} std {fr.std():.3f} saturated {sat:.1%}; latents std "
          f"{exp['latents_ddim'].std():.2f}; batch-of-2 vs batch-of-1 relL2 {batch_vs_single:.3e}")
    assert fr.std() > 0.05 and sat < 0.5
    assert (fr[:, 0] - fr[:, 1]).abs().max() > 1e-3, "frames identical"
    save_tensors(ref / "expected.safetensors", exp)

    case = {
        "description": "LattePipeline, tiny random LatteTransformer3DModel (4 heads x 8 = 32, 2 layers (2 spatial + 2 "
        "temporal blocks), patch 2, 10x10 latent -> 25 tokens per frame, video_length 3), learned sigma (out_channels 8), "
        "caption_channels 40; the rest as Latte-1's config (attention_bias, num_embeds_ada_norm 1000, "
        "norm_elementwise_affine false, norm_eps 1e-6); VAE (8, 8, 8, 8) -> 80x80 frames; T5 v1.1 text encoder "
        "(t5_gated) in float32",
        "versions": versions(),
        "text_encoder": "float32 copy of tests/fixtures/t5_encoder/t5_gated/text_encoder (float16 weights widened exactly), "
        "one model.safetensors; tokenizer/ a verbatim copy of t5_gated/tokenizer",
        "text_encoder_files": te_files,
        "transformer_config_effective": {k: v for k, v in tr.config.items() if not k.startswith("_")},
        "scheduler": "scheduler/scheduler_config.json: DDIMScheduler(beta_start=0.0001, beta_end=0.02, beta_schedule="
        "'linear', clip_sample=False, set_alpha_to_one=True, steps_offset=0, timestep_spacing='leading') as "
        "save_pretrained writes it (every key explicit). Modelled on Latte's sampler settings; the hub's Latte-1 file was "
        "not reachable. No variance_type key (see errors.variance_type_learned_range).",
        "ddim_config_effective": sched_effective(s),
        "timesteps_ddim": s.timesteps.tolist(),
        "forward": {
            "call": "transformer(latents, timestep=timestep, encoder_hidden_states=encoder_hidden_states).sample "
            "(no encoder_attention_mask, as LattePipeline calls it)",
            "inputs": "torch.Generator().manual_seed(13): randn latents [2, 4, 3, 10, 10] ([B, C, F, h, w]), randn "
            "encoder_hidden_states [2, 12, 40], randn latents_f1 [2, 4, 1, 10, 10]; timestep [999., 321.] float32",
            "frame_counts": frame_support,
            "encoder_attention_mask_[B,L]": mask_behaviour + " -- LatteTransformer3DModel passes the mask unconverted "
            "(no 0/1 -> bias step, no repeat over frames) to the spatial blocks' cross-attention; LattePipeline never "
            "passes one.",
            "temporal_effect_on_frame0_max_abs": float(d_temporal), "text_effect_max_abs": float(d_text),
            "sample_std": float(out.std()),
        },
        "pipeline": {
            "prompts": LATTE_PROMPTS, "prompt_tokens": prompts_info, "negative_prompt": "",
            "steps": LATTE_STEPS, "guidance_scale": LATTE_GS, "video_length": LATTE_F, "height": PIX, "width": PIX,
            "call": "pipe(prompt=prompts[i], negative_prompt='', num_inference_steps=3, guidance_scale=7.5, video_length=3, "
            "height=80, width=80, latents=noise[i:i+1], output_type='latent' (latents_ddim) or 'pt' (frames_ddim), "
            "clean_caption=False, mask_feature=True), one call per prompt (batch of one); scheduler: the pipeline's DDIM "
            "(ditgen 'ddim'), eta 0",
            "encode_call": "pipe.encode_prompt(prompts[i], do_classifier_free_guidance=True, negative_prompt='', "
            "clean_caption=False, mask_feature=True) -> (prompt_embeds_i [k, 40], negative_embeds_i [k, 40])",
            "noise": "torch.randn([2, 4, 3, 10, 10], generator=torch.Generator().manual_seed(43)); row i is prompt i's "
            "initial latents ([images, C, frames, h, w] as DESIGN.md --init-noise)",
            "observed_transformer_calls_prompt0": observed,
            "errors": errors,
            "batch_of_two_vs_batch_of_one_rel_l2": batch_vs_single,
        },
        "shapes": {k: [list(v.shape), str(v.dtype).removeprefix("torch.")] for k, v in exp.items()},
        "pipeline_notes": LATTE_NOTES,
        "notes": [
            "max_sequence_length: LattePipeline has none (TypeError, see pipeline.errors); it always tokenizes to 120 and "
            "mask_feature then cuts to k = the prompt's token count, so the run configs leave max_sequence_length at "
            "ditgen's Latte default 120.",
            "The text encoder runs on 120 padded tokens; running it on the k tokens only gives the same rows up to float "
            "rounding (masked keys get exactly zero weight); the max differences are in pipeline.prompt_tokens.",
            "negative_embeds_i: the first k rows of T5('' padded to 120): row 0 = EOS, rows 1..k-1 = padded positions "
            "(ids 0) encoded with the mask [1, 0, 0, ...] -- they are not zero and the transformer sees them unmasked.",
            "Batch order [negative; prompt] = [uncond; cond]; CFG on all 8 channels, then the split (see pipeline_notes 7b).",
            "frames_ddim is what LattePipeline returns for output_type 'pt': [B, F, 3, H, W] (frames before channels), "
            "float32 in [0, 1]. vae_input_ddim = (1 / scaling_factor) * latents_ddim ([B, C, F, h, w]; the pipeline "
            "decodes it frame by frame).",
            "DDIM leading: timesteps 1000 // 3 * arange(3) reversed = [666, 333, 0]; prev_t = t - 333; the last step "
            "goes to alpha_cumprod 1 (set_alpha_to_one); clip_sample false.",
            "A batch of several prompts in one LattePipeline call does not equal the batch-of-one results (mask_feature "
            "keeps 120 rows then): relL2 in pipeline.batch_of_two_vs_batch_of_one_rel_l2; ditgen follows the "
            "batch-of-one rule (DESIGN.md section 2).",
        ],
    }
    write_json(ref / "case.json", case)
    run = {
        "model": {"path": rel, "dtype": "float32"},
        "generate": {
            "prompts": LATTE_PROMPTS, "negative_prompt": "", "frames": LATTE_F, "height": PIX, "width": PIX,
            "seed": 0, "steps": LATTE_STEPS, "guidance_scale": LATTE_GS, "scheduler": "ddim",
            "batch_size": len(LATTE_PROMPTS),
        },
        "output": {"path": "out/fixtures/latte_tiny_ddim.png", "format": "png"},
    }
    write_json(ref / "run_ddim.json", run)
    return fdir


def main():
    major = int(transformers.__version__.split(".")[0])
    if major >= 5:
        sys.exit(f"transformers {transformers.__version__}: T5Tokenizer is not the sentencepiece one; use 'transformers<5'")
    total = 0
    for make in (make_pixart_tiny, make_pixart_1024_tiny, make_latte_tiny):
        fdir = make()
        size = 0
        for path, s in tree_listing(fdir):
            size += s
            print(f"   {s:>9d}  {path}")
        print(f"   {size:>9d}  total {fdir.name}")
        total += size
    print(f"{total:>12d}  all three fixtures")
    if "--sha" in sys.argv[1:]:
        for name in ("pixart_tiny", "pixart_1024_tiny", "latte_tiny"):
            for path, _ in tree_listing(FIXTURES / name):
                print(hashlib.sha256((REPO / path).read_bytes()).hexdigest(), path)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Train ditgen's shipped default model (samples/dit-shapes) on CPU.

Stage 1: a tiny AutoencoderKL (32x32x3 <-> 8x8x4) on the procedural
         coloured-shapes set (scripts/train/shapes_dataset.py), L1 + MSE + tiny KL.
Stage 2: a tiny class-conditional DiTTransformer2DModel (patch 2 on the 8x8x4
         latents -> 16 tokens) with epsilon prediction under DDPM noise
         (linear betas, 1000 steps).  Classifier-free-guidance label dropout
         (p=0.1, null class = num_embeds_ada_norm) is done by diffusers'
         LabelEmbedding itself in train mode.
Save:    DiTPipeline(...).save_pretrained(out) with a DDIMScheduler config,
         then id2label is written into model_index.json.
Check:   every class is sampled with an own DDIM + CFG loop (mirrors
         DiTPipeline but with null class = num_embeds_ada_norm), a simple
         colour (hue of the foreground after removing the border-estimated
         background) + shape (IoU against bbox-fitted templates) classifier
         measures agreement, and a contact sheet is written.

Usage (the reference Python environment, scripts/requirements.txt):
        python3 -m venv /root/venv-ditgen && /root/venv-ditgen/bin/pip install -r scripts/requirements.txt
        /root/venv-ditgen/bin/python scripts/train/train_default.py [--out samples/dit-shapes]
        /root/venv-ditgen/bin/python scripts/train/train_default.py --quick --out /tmp/x   # smoke test
Fixed seeds, torch.set_num_threads(2).  See the timing printed at the end
(and in docs/default-models.md / the docstring below once measured).
"""
from __future__ import annotations

import argparse
import copy
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shapes_dataset import (CLASS_NAMES, COLOUR_NAMES, NUM_CLASSES,  # noqa: E402
                            SHAPES, classify, generate_batch)

from diffusers import (AutoencoderKL, DDIMScheduler, DDPMScheduler,  # noqa: E402
                       DiTPipeline, DiTTransformer2DModel)

T0 = time.time()


def log(*a):
    print(f"[{time.time() - T0:7.1f}s]", *a, flush=True)


def to_tensor(imgs):
    return torch.from_numpy(imgs).permute(0, 3, 1, 2).float().div(127.5).sub(1.0)


def lr_at(step, total, base, warm=100):
    if step < warm:
        return base * (step + 1) / warm
    p = (step - warm) / max(1, total - warm)
    return base * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))


# -------------------------------------------------------------------- models
def make_vae():
    return AutoencoderKL(
        in_channels=3, out_channels=3,
        down_block_types=("DownEncoderBlock2D",) * 3,
        up_block_types=("UpDecoderBlock2D",) * 3,
        block_out_channels=(32, 64, 64), layers_per_block=1,
        latent_channels=4, norm_num_groups=32, sample_size=32)


def make_dit(hidden, heads, layers, patch):
    return DiTTransformer2DModel(
        num_attention_heads=heads, attention_head_dim=hidden // heads,
        in_channels=4, out_channels=4, num_layers=layers, sample_size=8,
        patch_size=patch, attention_bias=True, activation_fn="gelu-approximate",
        num_embeds_ada_norm=NUM_CLASSES, norm_type="ada_norm_zero",
        norm_elementwise_affine=False)


def make_ddpm():
    return DDPMScheduler(num_train_timesteps=1000, beta_start=0.0001, beta_end=0.02,
                         beta_schedule="linear", clip_sample=False)


@torch.no_grad()
def sample(transformer, vae, labels, steps=25, guidance=4.0, seed=0):
    """DDIM + CFG, mirroring DiTPipeline.__call__ but with null = num_embeds_ada_norm."""
    sched = DDIMScheduler.from_config(make_ddpm().config)
    sched.set_timesteps(steps)
    g = torch.Generator().manual_seed(seed)
    n = len(labels)
    c = transformer.config.in_channels
    s = transformer.config.sample_size
    lat = torch.randn(n, c, s, s, generator=g)
    y = torch.tensor(labels, dtype=torch.long)
    y_null = torch.full_like(y, transformer.config.num_embeds_ada_norm)
    yy = torch.cat([y, y_null])
    for t in sched.timesteps:
        inp = torch.cat([lat, lat])
        tt = torch.full((2 * n,), int(t), dtype=torch.long)
        out = transformer(inp, timestep=tt, class_labels=yy).sample
        eps = out[:, :c]
        ce, ue = eps[:n], eps[n:]
        e = ue + guidance * (ce - ue)
        lat = sched.step(e, t, lat).prev_sample
    img = vae.decode(lat / vae.config.scaling_factor).sample
    img = (img / 2 + 0.5).clamp(0, 1)
    return (img.permute(0, 2, 3, 1).numpy() * 255 + 0.5).astype(np.uint8)


def contact_sheet(imgs, cols, scale=2):
    from PIL import Image
    n, h, w, _ = imgs.shape
    rows = (n + cols - 1) // cols
    sheet = np.full((rows * (h + 2) + 2, cols * (w + 2) + 2, 3), 255, np.uint8)
    for i, im in enumerate(imgs):
        r, c = divmod(i, cols)
        sheet[2 + r * (h + 2):2 + r * (h + 2) + h, 2 + c * (w + 2):2 + c * (w + 2) + w] = im
    pil = Image.fromarray(sheet)
    return pil.resize((pil.width * scale, pil.height * scale), Image.NEAREST)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "samples", "dit-shapes"))
    ap.add_argument("--vae-steps", type=int, default=900)
    ap.add_argument("--vae-batch", type=int, default=32)
    ap.add_argument("--dit-steps", type=int, default=2500)
    ap.add_argument("--dit-batch", type=int, default=128)
    ap.add_argument("--latent-set", type=int, default=20000)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--patch", type=int, default=2)
    ap.add_argument("--vae-from", default=None,
                    help="reuse the VAE of an earlier run's output directory (skips stage 1)")
    ap.add_argument("--dit-from", default=None,
                    help="continue training the (EMA) transformer of an earlier run's output directory")
    ap.add_argument("--dit-lr", type=float, default=8e-4)
    ap.add_argument("--per-class-check", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="tiny smoke test")
    a = ap.parse_args()
    if a.quick:
        a.vae_steps, a.dit_steps, a.latent_set, a.per_class_check = 60, 100, 2000, 1
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    np.random.seed(0)
    os.makedirs(a.out, exist_ok=True)

    # ---------------------------------------------------------------- VAE
    vae = make_vae()
    log(f"VAE params {sum(p.numel() for p in vae.parameters()) / 1e6:.2f}M")
    if a.vae_from:
        vae = AutoencoderKL.from_pretrained(a.vae_from, subfolder="vae")
        a.vae_steps = 0
        log(f"VAE loaded from {a.vae_from}")
    opt = torch.optim.AdamW(vae.parameters(), lr=1e-3, weight_decay=0.0)
    vae.train()
    t_vae = time.time()
    for step in range(a.vae_steps):
        for gr in opt.param_groups:
            gr["lr"] = lr_at(step, a.vae_steps, 1e-3)
        imgs, _ = generate_batch(a.vae_batch, seed=1_000_000 + step)
        x = to_tensor(imgs)
        post = vae.encode(x).latent_dist
        z = post.sample()
        rec = vae.decode(z).sample
        l1 = (rec - x).abs().mean()
        mse = F.mse_loss(rec, x)
        kl = post.kl().mean() / (3 * 32 * 32)
        loss = l1 + mse + 1e-4 * kl
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(vae.parameters(), 1.0)
        opt.step()
        if step % 100 == 0 or step == a.vae_steps - 1:
            log(f"vae step {step} l1 {l1.item():.4f} mse {mse.item():.5f} kl {kl.item():.3f}")
    t_vae = time.time() - t_vae
    vae.eval()

    # ------------------------------------------------------- latent set
    t_lat = time.time()
    mus, stds, labs = [], [], []
    with torch.no_grad():
        for i in range(0, a.latent_set, 500):
            n = min(500, a.latent_set - i)
            imgs, lab = generate_batch(n, seed=2_000_000 + i)
            post = vae.encode(to_tensor(imgs)).latent_dist
            mus.append(post.mean)
            stds.append(post.std)
            labs.append(torch.from_numpy(lab))
    mus, stds, labs = torch.cat(mus), torch.cat(stds), torch.cat(labs)
    sf = float(1.0 / mus.std())
    vae.register_to_config(scaling_factor=sf)
    log(f"latents {tuple(mus.shape)} mean {mus.mean():.3f} std {mus.std():.3f} "
        f"post-std {stds.mean():.4f} -> scaling_factor {sf:.4f}")
    # reconstruction check of the VAE
    with torch.no_grad():
        imgs, lab = generate_batch(200, seed=3_000_000)
        rec = vae.decode(vae.encode(to_tensor(imgs)).latent_dist.mean).sample
        rec = ((rec / 2 + 0.5).clamp(0, 1).permute(0, 2, 3, 1).numpy() * 255 + 0.5).astype(np.uint8)
    ok_c = ok_s = 0
    for im, l in zip(rec, lab):
        c, s = classify(im)
        ok_c += c == COLOUR_NAMES[l // len(SHAPES)]
        ok_s += s == SHAPES[l % len(SHAPES)]
    ok_c0 = ok_s0 = 0
    for im, l in zip(imgs, lab):
        c, s = classify(im)
        ok_c0 += c == COLOUR_NAMES[l // len(SHAPES)]
        ok_s0 += s == SHAPES[l % len(SHAPES)]
    log(f"classifier on data: colour {ok_c0 / 2:.1f}% shape {ok_s0 / 2:.1f}% ; "
        f"on VAE recon: colour {ok_c / 2:.1f}% shape {ok_s / 2:.1f}%")
    t_lat = time.time() - t_lat

    # ---------------------------------------------------------------- DiT
    dit = make_dit(a.hidden, a.heads, a.layers, a.patch)
    if a.dit_from:
        dit = DiTTransformer2DModel.from_pretrained(a.dit_from, subfolder="transformer")
        log(f"DiT loaded from {a.dit_from}")
    ema = copy.deepcopy(dit).eval()
    for p in ema.parameters():
        p.requires_grad_(False)
    log(f"DiT params {sum(p.numel() for p in dit.parameters()) / 1e6:.2f}M")
    ddpm = make_ddpm()
    acp = ddpm.alphas_cumprod
    opt = torch.optim.AdamW(dit.parameters(), lr=a.dit_lr, weight_decay=0.0)
    g = torch.Generator().manual_seed(1234)
    dit.train()
    t_dit = time.time()
    for step in range(a.dit_steps):
        for gr in opt.param_groups:
            gr["lr"] = lr_at(step, a.dit_steps, a.dit_lr, warm=200)
        idx = torch.randint(0, len(mus), (a.dit_batch,), generator=g)
        z0 = (mus[idx] + stds[idx] * torch.randn(mus[idx].shape, generator=g)) * sf
        y = labs[idx]
        t = torch.randint(0, 1000, (a.dit_batch,), generator=g)
        noise = torch.randn(z0.shape, generator=g)
        ab = acp[t].view(-1, 1, 1, 1)
        zt = ab.sqrt() * z0 + (1 - ab).sqrt() * noise
        # label dropout to the null class (index NUM_CLASSES) happens inside
        # LabelEmbedding in train mode (class_dropout_prob=0.1)
        pred = dit(zt, timestep=t, class_labels=y).sample
        loss = F.mse_loss(pred, noise)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(dit.parameters(), 1.0)
        opt.step()
        decay = min(0.999, (1 + step) / (10 + step))
        with torch.no_grad():
            for pe, pm in zip(ema.parameters(), dit.parameters()):
                pe.lerp_(pm, 1 - decay)
        if step % 200 == 0 or step == a.dit_steps - 1:
            log(f"dit step {step} loss {loss.item():.4f}")
    t_dit = time.time() - t_dit

    # ---------------------------------------------------------------- save
    ddim = DDIMScheduler.from_config(ddpm.config)
    ema.eval()
    pipe = DiTPipeline(transformer=ema, vae=vae, scheduler=ddim)
    pipe.save_pretrained(a.out, safe_serialization=True)
    mi_path = os.path.join(a.out, "model_index.json")
    with open(mi_path) as f:
        mi = json.load(f)
    mi["id2label"] = {str(i): n for i, n in enumerate(CLASS_NAMES)}
    with open(mi_path, "w") as f:
        json.dump(mi, f, indent=2)
    total = 0
    for root, _, files in os.walk(a.out):
        total += sum(os.path.getsize(os.path.join(root, fn)) for fn in files)
    log(f"saved to {a.out} ({total / 1e6:.2f} MB)")

    # ---------------------------------------------------------------- check
    t_chk = time.time()
    k = a.per_class_check
    labels = [c for c in range(NUM_CLASSES) for _ in range(k)]
    imgs = sample(ema, vae, labels, steps=25, guidance=4.0, seed=0)
    ok = ok_c = ok_s = 0
    for im, l in zip(imgs, labels):
        c, s = classify(im)
        gc, gs = COLOUR_NAMES[l // len(SHAPES)], SHAPES[l % len(SHAPES)]
        ok_c += c == gc
        ok_s += s == gs
        ok += (c == gc) and (s == gs)
    n = len(labels)
    log(f"self-check (DDIM 25 steps, guidance 4, {k}/class): colour {100 * ok_c / n:.1f}% "
        f"shape {100 * ok_s / n:.1f}% both {100 * ok / n:.1f}%")
    first = imgs.reshape(NUM_CLASSES, k, *imgs.shape[1:])[:, 0]
    contact_sheet(first, cols=len(SHAPES), scale=3).save(
        os.path.join(a.out, "contact_sheet_reference.png"))
    contact_sheet(imgs, cols=len(SHAPES) * k, scale=2).save(
        os.path.join(a.out, "..", f"{os.path.basename(os.path.normpath(a.out))}_check_all.png")
        if a.quick else "/tmp/dit_shapes_check_all.png")
    t_chk = time.time() - t_chk
    log(f"times: vae {t_vae:.0f}s, latents {t_lat:.0f}s, dit {t_dit:.0f}s, check {t_chk:.0f}s, "
        f"total {time.time() - T0:.0f}s")


if __name__ == "__main__":
    main()

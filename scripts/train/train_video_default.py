#!/usr/bin/env python3
"""Train ditgen's default text-to-video model (samples/latte-shapes) on CPU.

The model is a diffusers LattePipeline directory whose parts are all tiny:

  tokenizer     a SentencePiece BPE model (160 pieces) trained on the 180
                captions of scripts/train/shapes_video_dataset.py ("a red circle
                moving left"), saved by transformers' T5Tokenizer
                (extra_ids 0): every caption word is one piece, other words
                fall back to letters
  text_encoder  a T5EncoderModel (T5 v1.1 gated-gelu, d_model 64, 2 layers,
                4 heads), random and FROZEN: with 180 fixed captions its
                outputs are distinct, well-conditioned vectors per word and
                position (RMS-normalised), which the transformer's caption
                projection and cross-attention learn to read; freezing it
                lets every caption be encoded once, before training, so all
                of the CPU budget goes to the video model
  vae           the image default's AutoencoderKL (samples/dit-shapes/vae,
                32x32x3 <-> 8x8x4), reused unchanged: Latte decodes frame by
                frame, and the frames are the same kind of images
  transformer   a LatteTransformer3DModel: patch 2 on the 8x8 latents (16
                tokens per frame, 256 per 16-frame clip), hidden 192 (6 heads
                of 32), 4 layers (4 spatial + 4 temporal blocks), out_channels
                8 as Latte-1 (learned-sigma layout: LattePipeline always keeps
                the first half of the channels; only those are trained)
  scheduler     DDIMScheduler, linear betas 1e-4 .. 0.02 (Latte's sampler),
                prediction_type v_prediction

Training: DDPM v-prediction loss (v = sqrt(abar) eps - sqrt(1 - abar) z0) on
VAE latents of procedurally drawn clips (means + std * noise of the
encoder's posterior), classifier-free-guidance
dropout (p = 0.1) to the negative prompt's encoding ("" cut to the caption's
token count, LattePipeline's mask_feature rule), EMA 0.999. Time reversal
is free augmentation in latent space (frames are encoded independently):
a reversed "moving left" clip is a "moving right" one, "growing" becomes
"shrinking". Captions have 5 or 6 tokens; each step's batch takes one token
count so the batch needs no padding (LattePipeline does not pad either).

Why v rather than Latte's epsilon: on 8x8 latents the layout, shape and
motion of a clip are decided at large t, where an epsilon target is almost
the input itself (at t = 800 abar is 0.0015) and its loss barely depends on
the caption. Trained on epsilon for 2500 steps, the model's loss was the
same to 4 digits for the right caption and for one with the shape or the
motion changed, and its samples followed colour only (shape and motion at
chance). The v loss is the epsilon loss weighted by 1/abar: after 500
steps the caption already changes it (colour, then motion).

Why hidden 192: the shape of a 16-18 px figure is what a small model learns
last. A sweep of recipes at 6000 steps (run on a GPU, --device cuda, each
scored by this script's check): hidden 128 (the first shipped model) 55.6%
shape; with the lr decay from step 2000 47.2%; with 6000 distinct clips
66.7%; hidden 192 80.6%, and 66.7% when stopped at 4000 steps. At hidden 192
a float32 step costs 0.90 s on 2 cores, 6000 steps 90 min: bfloat16 autocast
on the linear layers (AVX512-BF16 matmuls, 2.8x float32's rate here) with the
attention kept in float32 on PyTorch's math path brings it to 0.53 s, and
torch.compile (Inductor's fused C++ kernels for the norms, modulations and
GELUs) to 0.42 s in short runs (the shipped run averaged 0.50 s, the one
before it 0.53 s on this shared machine, where an uncompiled run averaged
0.64 s): 6600 steps fit in the hour. A second GPU sweep, scored on 90 captions
(--check-group 2): bfloat16 73.3% shape, float32 77.8%, a batch half drawn
from the noisy timesteps t >= 500 71.1%, that and 6000 distinct clips 71.1%:
neither helped. Stars are most of the misses (the model draws them as
blobs or crosses). The VAE alone does not explain it: its decoder,
fine-tuned on video frames, raised the shape score of true clips sent
through the VAE from 91% to 97% (stars 56% to 84%) but not that of the
uniform-caption model's samples (73.3% before, 74.4% after, stars 4 and 5
of 36, over all 180 captions); more star clips in training did (below).

Why --star-weight 4: the training clips' captions are drawn with each
star caption 4 times as likely as any other (50% of the clips show a
star, against 20% uniform). Over all 180 captions (ditgen, bfloat16, as
the quality test samples them), shape / stars of 36 / the other four
shapes of 144: uniform captions 73.3% / 4 / 128; weight 2.5 (38% stars)
77.2% / 8 / 131; weight 4 80.6% / 18 / 127 (circle 30, square 29,
triangle 36, cross 32). The stars gain more than the others lose.
A decoder fine-tuned on the training frames after the transformer (300
Adam steps at 1e-3, MSE + L1: 2.5 min) lowered weight 4's score to 74.4%
(squares drawn as circles), so the VAE stays the image default's.

Usage (fixed seeds, torch.set_num_threads(2); times in docs/default-models.md;
the reference Python environment, scripts/requirements.txt):
    python3 -m venv /root/venv-ditgen && /root/venv-ditgen/bin/pip install -r scripts/requirements.txt
    /root/venv-ditgen/bin/python scripts/train/train_video_default.py --out samples/latte-shapes
    /root/venv-ditgen/bin/python scripts/train/train_video_default.py --quick --out /tmp/x   # smoke test
A run can be split (a shared machine, a session's time): --state FILE keeps
the whole training state with every checkpoint and at the end, and
`--resume --state FILE --steps N` continues it to N steps with the same
result as one uninterrupted run (every random draw of the loop comes from
one generator, whose state is saved).
Writes the directory with save_pretrained, then samples a check set with
LattePipeline and prints colour / shape / motion agreement (the measures of
scripts/train/video_quality.py, ported to C++ in src/eval/motion_measure.cpp).
"""
from __future__ import annotations

import argparse
import copy
import functools
import io
import math
import os
import shutil
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import sentencepiece as spm  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shapes_video_dataset import CAPTIONS, FRAMES, MOTIONS, caption_parts, generate_clips  # noqa: E402
from video_quality import score_clip  # noqa: E402

from diffusers import (AutoencoderKL, DDIMScheduler, LattePipeline,  # noqa: E402
                       LatteTransformer3DModel)
from diffusers.utils import logging as diffusers_logging  # noqa: E402
from transformers import T5Config, T5EncoderModel, T5Tokenizer  # noqa: E402
from transformers import logging as transformers_logging  # noqa: E402

diffusers_logging.set_verbosity_error()
diffusers_logging.disable_progress_bar()
transformers_logging.set_verbosity_error()

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
T0 = time.time()
CLIP_SEED = 5_000_000  # the training clips' generator seeds (captions: CLIP_SEED - 1)
DDIM_KWARGS = dict(beta_start=0.0001, beta_end=0.02, beta_schedule="linear", clip_sample=False,
                   num_train_timesteps=1000, set_alpha_to_one=True,
                   steps_offset=0, timestep_spacing="leading")


def log(*a):
    print(f"[{time.time() - T0:7.1f}s]", *a, flush=True)


def lr_at(step, base, steps, decay_start=None, warm=200):
    """Linear warm-up, then constant (the EMA does the averaging) until
    decay_start, then a cosine down to base / 10 at `steps`. Up to
    decay_start the run does not depend on --steps, so a checkpoint saved
    there is exactly what `--steps N` gives; a run resumed from it with
    --decay-start continues the same schedule."""
    if decay_start is not None and step >= decay_start:
        p = (step - decay_start) / max(1, steps - decay_start)
        return base * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))
    return base * min(1.0, (step + 1) / warm)


# ------------------------------------------------------------------ parts
def make_tokenizer(tmp):
    """SentencePiece unigram model on the captions, as a T5Tokenizer folder."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(CAPTIONS * 4), model_writer=model, model_type="bpe", vocab_size=160,
        character_coverage=1.0, pad_id=0, eos_id=1, unk_id=2, bos_id=-1, hard_vocab_limit=False,
        normalization_rule_name="identity", remove_extra_whitespaces=True, add_dummy_prefix=True,
        minloglevel=2, num_threads=1, seed_sentencepiece_size=20000)
    path = os.path.join(tmp, "spiece.model")
    with open(path, "wb") as f:
        f.write(model.getvalue())
    tok = T5Tokenizer(vocab_file=path, legacy=True, extra_ids=0)
    tok.save_pretrained(os.path.join(tmp, "tokenizer"))
    return T5Tokenizer.from_pretrained(os.path.join(tmp, "tokenizer"))


def make_text_encoder(vocab):
    torch.manual_seed(17)
    cfg = T5Config(vocab_size=vocab, d_model=64, d_kv=16, num_heads=4, d_ff=128, num_layers=2,
                   feed_forward_proj="gated-gelu", dropout_rate=0.0, relative_attention_num_buckets=8,
                   relative_attention_max_distance=16, is_encoder_decoder=False, use_cache=False)
    te = T5EncoderModel(cfg).eval()
    for p in te.parameters():
        p.requires_grad_(False)
    return te


def make_transformer(hidden, heads, layers, patch, caption_channels):
    torch.manual_seed(23)
    return LatteTransformer3DModel(
        num_attention_heads=heads, attention_head_dim=hidden // heads, in_channels=4, out_channels=8,
        num_layers=layers, cross_attention_dim=hidden, caption_channels=caption_channels, sample_size=8,
        patch_size=patch, norm_type="ada_norm_single", activation_fn="gelu-approximate", attention_bias=True,
        num_embeds_ada_norm=1000, norm_elementwise_affine=False, norm_eps=1e-6, video_length=FRAMES)


def float32_math_attention(sdpa, q, k, v, *args, **kwargs):
    """Attention in float32 on the math path under bfloat16 autocast. Its
    sequences are 16 tokens (a frame's 4x4 patches, or a patch's 16 frames):
    PyTorch's CPU flash kernel is slow on those in float32 and 4x slower again
    in bfloat16 (backward), where the math path's small matmuls are cheap."""
    with torch.autocast(q.device.type, enabled=False), sdpa_kernel(SDPBackend.MATH):
        return sdpa(q.float(), k.float(), v.float(), *args, **kwargs).to(q.dtype)


def reversed_caption(cid):
    """Caption of the time-reversed clip: left<->right, up<->down, growing<->shrinking."""
    return cid - cid % len(MOTIONS) + ((cid % len(MOTIONS)) ^ 1)


@torch.no_grad()
def encode_captions(pipe):
    """Per caption: (prompt_embeds [k, D], negative_embeds [k, D]) as LattePipeline computes them."""
    out = []
    for c in CAPTIONS:
        pe, ne = pipe.encode_prompt(c, do_classifier_free_guidance=True, negative_prompt="",
                                    clean_caption=False, mask_feature=True)
        out.append((pe[0], ne[0]))
    return out


def training_captions(n, seed, star_weight):
    """Caption ids of the n training clips: uniform over the 180 (None: the
    clip generator draws them) or, with star_weight != 1, each star caption
    star_weight times as likely as any other."""
    if star_weight == 1.0:
        return None
    w = np.array([star_weight if caption_parts(i)[1] == "star" else 1.0 for i in range(len(CAPTIONS))])
    return np.random.default_rng(seed).choice(len(CAPTIONS), n, p=w / w.sum())


@torch.no_grad()
def encode_clips(vae, n, seed, star_weight=1.0, chunk=100):
    """VAE posterior mean and std of n clips: float32 [n, 4, F, 8, 8] each, plus caption ids."""
    mus, stds, ids = [], [], []
    captions = training_captions(n, seed - 1, star_weight)  # its own generator: the clips' seeds stay
    for i in range(0, n, chunk):
        part = None if captions is None else captions[i:i + chunk]
        clips, cid = generate_clips(min(chunk, n - i), seed + i, part)
        x = torch.from_numpy(clips).flatten(0, 1).permute(0, 3, 1, 2).float().div(127.5).sub(1.0)
        post = vae.encode(x.to(vae.device)).latent_dist
        shape = (len(cid), FRAMES) + tuple(post.mean.shape[1:])
        mus.append(post.mean.reshape(shape).permute(0, 2, 1, 3, 4).contiguous().cpu())
        stds.append(post.std.reshape(shape).permute(0, 2, 1, 3, 4).contiguous().cpu())
        ids.append(torch.from_numpy(cid))
    return torch.cat(mus), torch.cat(stds), torch.cat(ids)


def save(pipe, transformer, out):
    pipe.transformer = transformer
    tmp = out.rstrip("/") + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    pipe.save_pretrained(tmp, safe_serialization=True)
    shutil.rmtree(out, ignore_errors=True)
    os.rename(tmp, out)
    total = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(out) for f in fs)
    log(f"saved {out} ({total / 1e6:.2f} MB)")


def save_state(path, transformer, ema, opt, g, steps_done, star_weight):
    """Everything the loop's future depends on, written atomically (and the
    clips' --star-weight, which a resumed run must share)."""
    tmp = path + ".tmp"
    torch.save({"transformer": transformer.state_dict(), "ema": ema.state_dict(), "optimizer": opt.state_dict(),
                "generator": g.get_state(), "step": steps_done, "star_weight": star_weight}, tmp)
    os.replace(tmp, path)


@torch.no_grad()
def check(pipe, per_caption_group, steps, guidance, seed=0):
    """Samples captions covering every colour, shape and motion; prints agreement."""
    ids = [((c * 5 + s) * 6 + m) for c in range(6) for s in range(5) for m in range(6)
           if (c + s + m) % per_caption_group == 0]
    ok = {"colour": 0, "shape": 0, "motion": 0}
    for j, cid in enumerate(ids):
        g = torch.Generator().manual_seed(seed + j)
        vid = pipe(prompt=CAPTIONS[cid], negative_prompt="", num_inference_steps=steps, guidance_scale=guidance,
                   video_length=FRAMES, height=32, width=32, generator=g, output_type="pt",
                   clean_caption=False, mask_feature=True).frames[0]
        clip = (vid.permute(0, 2, 3, 1).cpu().numpy() * 255 + 0.5).astype(np.uint8)
        for k, v in score_clip(clip, cid).items():
            ok[k] += v
    n = len(ids)
    log(f"check ({n} captions, DDIM {steps}, guidance {guidance}): " +
        ", ".join(f"{k} {100 * v / n:.1f}%" for k, v in ok.items()))


def keep_freed_memory():
    """Stop glibc from handing freed tensor memory back to the kernel after every step.

    By default each step's larger buffers are mmapped and unmapped, or trimmed
    off the heap, and every page is faulted in and zeroed again on the next
    step. Whole 6,600-step runs: 136 million page faults and 338 s of system
    time before, 12 million and 49 s with the thresholds raised; in a 140-step
    A/B from the same latent cache 0.522 -> 0.507 s a step, the same losses.
    """
    import ctypes
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc: nothing to tune
        return
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    # mallopt returns 1 when it takes a value; 32 MB is glibc's largest mmap threshold
    if not (libc.mallopt(M_MMAP_THRESHOLD, 32 << 20) and libc.mallopt(M_TRIM_THRESHOLD, 1 << 30)):
        print("warning: glibc refused the malloc thresholds (training is slower, not different)", flush=True)


def main():
    keep_freed_memory()  # this run only, not a process that imports the module
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(REPO, "samples", "latte-shapes"))
    ap.add_argument("--vae-from", default=os.path.join(REPO, "samples", "dit-shapes"))
    ap.add_argument("--clips", type=int, default=2000)
    ap.add_argument("--latent-cache", default=None,
                    help="file that keeps the encoded clips between runs (made if missing; a cache, not an input)")
    ap.add_argument("--star-weight", type=float, default=4.0,
                    help="how much likelier a star caption is than any other among the training clips "
                         "(1: uniform; the star is the shape the model learns last)")
    ap.add_argument("--steps", type=int, default=6600)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--decay-start", type=int, default=4200,
                    help="step from which the learning rate falls (cosine) to lr/10 at --steps; "
                         "a value >= --steps keeps it constant")
    ap.add_argument("--hidden", type=int, default=192)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--patch", type=int, default=2)
    ap.add_argument("--save-every", type=int, default=250)
    ap.add_argument("--check-steps", type=int, default=25)
    ap.add_argument("--check-group", type=int, default=5,
                    help="the check samples the captions whose colour + shape + motion indices are a multiple of "
                         "this: 5 gives 36 captions (every colour, shape and motion), 1 all 180")
    ap.add_argument("--guidance", type=float, default=5.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=True,
                    help="bfloat16 autocast for the transformer's linear layers (float32 weights, optimizer, "
                         "loss and attention): 0.53 s a step at hidden 192 on 2 idle cores against 0.90 in float32")
    ap.add_argument("--compile", action=argparse.BooleanOptionalAction, default=True,
                    help="torch.compile the transformer for training (0.42 s a step against 0.53 on 2 idle cores, "
                         "after 1-2 min of compiling, less with Inductor's cache warm; the same losses to 4 digits)")
    ap.add_argument("--device", default="cpu",
                    help="where the transformer trains and the check samples (cuda: for exploring recipes "
                         "quickly; the shipped model is trained on the CPU). Every random draw stays on the CPU")
    ap.add_argument("--prediction", choices=["v_prediction", "epsilon"], default="v_prediction",
                    help="what the transformer predicts (see the docstring: epsilon leaves the caption unlearnt)")
    ap.add_argument("--state", default=None,
                    help="file that keeps the whole training state (weights, EMA, optimizer, random generator, "
                         "step), written with every checkpoint")
    ap.add_argument("--resume", action="store_true",
                    help="continue from --state: the result equals an uninterrupted run's")
    ap.add_argument("--quick", action="store_true", help="tiny smoke test")
    if "--quick" in sys.argv[1:]:  # smaller defaults; options given still win
        ap.set_defaults(clips=200, steps=30, save_every=1000, check_group=30)
    a = ap.parse_args()
    if not a.star_weight > 0:
        ap.error(f"--star-weight must be positive (got {a.star_weight})")
    st = None  # the --resume state, checked before any work
    if a.resume:
        if not a.state or not os.path.exists(a.state):
            sys.exit(f"--resume needs the --state file of an earlier run ({a.state} not found)")
        st = torch.load(a.state, weights_only=False)
        trained = st.get("star_weight", 1.0)  # states from before --star-weight: uniform captions
        if trained != a.star_weight:
            sys.exit(f"--resume: {a.state} was trained with --star-weight {trained}, not {a.star_weight}")
    torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    torch.manual_seed(0)
    np.random.seed(0)

    tmp = tempfile.mkdtemp(prefix="latte_shapes_")
    tokenizer = make_tokenizer(tmp)
    lens = sorted({len(tokenizer(c).input_ids) for c in CAPTIONS})
    log(f"tokenizer: {len(tokenizer)} ids, caption lengths {lens}; "
        f"'{CAPTIONS[0]}' -> {tokenizer.convert_ids_to_tokens(tokenizer(CAPTIONS[0]).input_ids)}")
    text_encoder = make_text_encoder(len(tokenizer))
    vae = AutoencoderKL.from_pretrained(a.vae_from, subfolder="vae").eval()
    transformer = make_transformer(a.hidden, a.heads, a.layers, a.patch, text_encoder.config.d_model)
    sched = DDIMScheduler(**DDIM_KWARGS, prediction_type=a.prediction)
    pipe = LattePipeline(tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, transformer=transformer,
                         scheduler=sched)
    log(f"params: T5 {sum(p.numel() for p in text_encoder.parameters()) / 1e6:.3f}M, "
        f"VAE {sum(p.numel() for p in vae.parameters()) / 1e6:.2f}M, "
        f"Latte {sum(p.numel() for p in transformer.parameters()) / 1e6:.2f}M")

    embeds = encode_captions(pipe)
    log("captions encoded")
    text_encoder.requires_grad_(False)
    t_lat = time.time()
    cache_key = {"clips": a.clips, "star_weight": a.star_weight, "vae_from": os.path.abspath(a.vae_from)}
    cached = torch.load(a.latent_cache) if a.latent_cache and os.path.exists(a.latent_cache) else None
    if isinstance(cached, dict) and cached.get("key") == cache_key:
        mus, stds, cids = cached["mus"], cached["stds"], cached["cids"]
    else:
        if cached is not None:
            log(f"{a.latent_cache} was made for other clips: encoding again")
        mus, stds, cids = encode_clips(vae.to(dev), a.clips, seed=CLIP_SEED, star_weight=a.star_weight)
        if a.latent_cache:
            torch.save({"key": cache_key, "mus": mus, "stds": stds, "cids": cids}, a.latent_cache)
    sf = vae.config.scaling_factor
    stars = sum(caption_parts(int(c))[1] == "star" for c in cids) / len(cids)
    log(f"latents {tuple(mus.shape)} in {time.time() - t_lat:.0f}s ({100 * stars:.0f}% stars); "
        f"std x scaling_factor {mus.std() * sf:.3f}")
    # clips grouped by caption token count (5: growing/shrinking, 6: moving ...)
    klen = torch.tensor([embeds[int(c)][0].shape[0] for c in cids])
    groups = [torch.nonzero(klen == k).flatten() for k in sorted(set(klen.tolist()))]
    group_p = torch.tensor([len(g) for g in groups], dtype=torch.float64)

    transformer.to(dev)
    ema = copy.deepcopy(transformer).eval().requires_grad_(False)
    acp = sched.alphas_cumprod
    opt = torch.optim.AdamW(transformer.parameters(), lr=a.lr, weight_decay=0.0, foreach=True)
    g = torch.Generator().manual_seed(1234)
    first = 0
    if st is not None:
        transformer.load_state_dict(st["transformer"])
        ema.load_state_dict(st["ema"])
        opt.load_state_dict(st["optimizer"])
        g.set_state(st["generator"])
        first = st["step"]
        log(f"resumed from {a.state} after {first} steps")
    transformer.train()
    sdpa = F.scaled_dot_product_attention
    if a.bf16:  # diffusers' attention calls F.scaled_dot_product_attention: keep it float32
        F.scaled_dot_product_attention = functools.update_wrapper(functools.partial(float32_math_attention, sdpa), sdpa)
    model = torch.compile(transformer) if a.compile else transformer
    ema_params, model_params = list(ema.parameters()), list(transformer.parameters())
    t_train = time.time()
    for step in range(first, a.steps):
        for gr in opt.param_groups:
            gr["lr"] = lr_at(step, a.lr, a.steps, a.decay_start)
        grp = groups[int(torch.multinomial(group_p, 1, generator=g))]
        idx = grp[torch.randint(0, len(grp), (a.batch,), generator=g)]
        z0 = (mus[idx] + stds[idx] * torch.randn(mus[idx].shape, generator=g)) * sf
        cid = cids[idx].clone()
        flip = torch.rand(a.batch, generator=g) < 0.5
        z0[flip] = z0[flip].flip(2)
        cid[flip] = torch.tensor([reversed_caption(int(c)) for c in cid[flip]], dtype=cid.dtype)
        drop = torch.rand(a.batch, generator=g) < 0.1
        ehs = torch.stack([embeds[int(c)][1 if d else 0] for c, d in zip(cid, drop)])
        t = torch.randint(0, 1000, (a.batch,), generator=g)
        noise = torch.randn(z0.shape, generator=g)
        ab = acp[t].view(-1, 1, 1, 1, 1)
        zt = ab.sqrt() * z0 + (1 - ab).sqrt() * noise
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=a.bf16):
            pred = model(hidden_states=zt.to(dev), encoder_hidden_states=ehs.to(dev),
                         timestep=t.to(dev)).sample[:, :4].float()
        target = (noise if a.prediction == "epsilon" else ab.sqrt() * noise - (1 - ab).sqrt() * z0).to(dev)
        loss = F.mse_loss(pred, target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(transformer.parameters(), 1.0)
        opt.step()
        decay = min(0.999, (1 + step) / (10 + step))
        with torch.no_grad():
            torch._foreach_lerp_(ema_params, model_params, 1 - decay)
        if step % 20 == 0 or step == a.steps - 1:
            el = time.time() - t_train
            log(f"step {step} loss {loss.item():.4f} ({el / (step + 1 - first):.2f} s/step)")
        if (step + 1) % a.save_every == 0 and step + 1 < a.steps:
            save(pipe, ema, a.out)
            if a.state:
                save_state(a.state, transformer, ema, opt, g, step + 1, a.star_weight)
            log(f"checkpoint after {step + 1} steps")
    t_train = time.time() - t_train
    F.scaled_dot_product_attention = sdpa
    save(pipe, ema, a.out)
    if a.state:
        save_state(a.state, transformer, ema, opt, g, a.steps, a.star_weight)
    shutil.rmtree(tmp, ignore_errors=True)
    log(f"training steps {first}..{a.steps} x {a.batch} clips in {t_train:.0f}s "
        f"({t_train / max(1, a.steps - first):.2f} s/step)")
    pipe = LattePipeline.from_pretrained(a.out).to(dev)
    pipe.set_progress_bar_config(disable=True)
    check(pipe, per_caption_group=a.check_group, steps=a.check_steps, guidance=a.guidance)
    log(f"total {time.time() - T0:.0f}s")


if __name__ == "__main__":
    main()

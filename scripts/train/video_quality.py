#!/usr/bin/env python3
"""Quality measure of ditgen's default video model (samples/latte-shapes):
does a generated clip show the caption's colour, shape and motion?

Colour and shape: scripts/train/shapes_dataset.py's classify() on the frame with
the most foreground (the largest view of the shape: any frame of a
translation, the last of "growing", the first of "shrinking").
Motion: per frame, the foreground is the pixels further than 0.3 (RGB in
[0, 1]) from the median colour of that frame's border (classify()'s rule);
its centroid and area are averaged over the first and the last 4 frames.
A centroid shift of at least 4 px is a translation, named by its larger
axis and sign (+x right, +y down); otherwise an area ratio last/first above
1.5 is "growing", below 1/1.5 "shrinking"; anything else is no motion.
src/eval/motion_measure.cpp is its C++ port (the quality test's measure).

Scoring all 180 captions (as the quality test does, in C++), in the reference
Python environment (scripts/requirements.txt):
    python3 -m venv /root/venv-ditgen && /root/venv-ditgen/bin/pip install -r scripts/requirements.txt
    /root/venv-ditgen/bin/python scripts/train/video_quality.py --captions > /tmp/captions.txt
    ./build/ditgen --config configs/default.json --prompt-file /tmp/captions.txt \
        --set output.format=png --set output.fps=null --set output.crf=null --set output.grid=false --output /tmp/all/c.png
    /root/venv-ditgen/bin/python scripts/train/video_quality.py /tmp/all/c     # reads c_0000_f000.png ...
prints colour / shape / motion agreement and the shape confusions.
    /root/venv-ditgen/bin/python scripts/train/video_quality.py --vae samples/latte-shapes/vae
scores true clips sent through the VAE instead: an estimate of the ceiling
that VAE puts on the samples (of what its decoder makes of good latents).
"""
from __future__ import annotations

import argparse
import collections
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shapes_dataset import SHAPES, classify  # noqa: E402
from shapes_video_dataset import CAPTIONS, FRAMES, caption_parts  # noqa: E402

EDGE_FRAMES = 4
MIN_SHIFT_PX = 4.0
AREA_RATIO = 1.5


def foreground(frame: np.ndarray) -> np.ndarray:
    x = frame.astype(np.float32) / 255.0
    border = np.concatenate([x[0], x[-1], x[:, 0], x[:, -1]])
    bg = np.median(border, axis=0)
    return np.sqrt(((x - bg) ** 2).sum(-1)) > 0.3


def motion_of(clip: np.ndarray):
    """clip uint8 [F, H, W, 3] -> motion name or None."""
    cx, cy, area = [], [], []
    for f in clip:
        m = foreground(f)
        ys, xs = np.nonzero(m)
        area.append(len(xs))
        cx.append(xs.mean() if len(xs) else np.nan)
        cy.append(ys.mean() if len(ys) else np.nan)
    cx, cy, area = np.array(cx), np.array(cy), np.array(area, dtype=np.float64)
    e = EDGE_FRAMES
    if np.isnan(cx[:e]).all() or np.isnan(cx[-e:]).all():
        return None
    dx = np.nanmean(cx[-e:]) - np.nanmean(cx[:e])
    dy = np.nanmean(cy[-e:]) - np.nanmean(cy[:e])
    if max(abs(dx), abs(dy)) >= MIN_SHIFT_PX:
        if abs(dx) >= abs(dy):
            return "moving right" if dx > 0 else "moving left"
        return "moving down" if dy > 0 else "moving up"
    ratio = area[-e:].mean() / max(1.0, area[:e].mean())
    if ratio > AREA_RATIO:
        return "growing"
    if ratio < 1 / AREA_RATIO:
        return "shrinking"
    return None


def named_colour_shape(clip: np.ndarray):
    """classify() of the clip's frame with the most foreground: (colour, shape), either None."""
    return classify(clip[int(np.argmax([foreground(f).sum() for f in clip]))])


def score_clip(clip: np.ndarray, caption_id: int, named=None) -> dict:
    """{colour, shape, motion: bool} for a clip generated from caption_id
    (named: its named_colour_shape() where the caller has it already)."""
    colour, shape, motion = caption_parts(caption_id)
    c, s = named if named is not None else named_colour_shape(clip)
    return {"colour": c == colour, "shape": s == shape, "motion": motion_of(clip) == motion}


def report(clips_and_ids):
    """Print colour / shape / motion agreement and the shape confusions of (clip, caption id) pairs;
    returns (agreeing clips per measure, clips)."""
    ok = collections.Counter()
    named = collections.Counter()  # (asked shape, named shape) -> clips
    asked = collections.Counter()
    for clip, cid in clips_and_ids:
        colour_shape = named_colour_shape(clip)
        for k, v in score_clip(clip, cid, colour_shape).items():
            ok[k] += v
        shape = caption_parts(cid)[1]
        named[(shape, colour_shape[1] or "no shape")] += 1
        asked[shape] += 1
    n = sum(asked.values())
    print(", ".join(f"{k} {ok[k]}/{n} ({100 * ok[k] / n:.1f}%)" for k in ("colour", "shape", "motion")))
    for s in SHAPES:
        other = ", ".join(f"{b} {v}" for (t, b), v in sorted(named.items()) if t == s and b != s)
        print(f"  {s:8s} {named[(s, s)]}/{asked[s]}" + (f"  (named {other})" if other else ""))
    return ok, n


def ditgen_clips(prefix):
    """The 180 clips of a ditgen --prompt-file run over the captions, in caption-id order."""
    from PIL import Image
    for cid in range(len(CAPTIONS)):
        yield np.stack([np.array(Image.open(f"{prefix}_{cid:04d}_f{k:03d}.png").convert("RGB"))
                        for k in range(FRAMES)]), cid


def vae_clips(vae_dir, n=360, seed=777):
    """n drawn clips (uniform captions, seeds apart from training's) sent through the
    AutoencoderKL at vae_dir, frame by frame: encoder mean, then decoder. Their score
    estimates the ceiling that VAE puts on a transformer's samples."""
    import torch
    from diffusers import AutoencoderKL
    from shapes_video_dataset import generate_clips
    torch.set_num_threads(2)
    vae = AutoencoderKL.from_pretrained(vae_dir).eval()
    clips, cids = generate_clips(n, seed)
    for clip, cid in zip(clips, cids):
        x = torch.from_numpy(clip).permute(0, 3, 1, 2).float().div(127.5).sub(1)
        with torch.no_grad():
            y = vae.decode(vae.encode(x).latent_dist.mean).sample
        yield ((y.clamp(-1, 1) + 1) * 127.5 + 0.5).to(torch.uint8).permute(0, 2, 3, 1).numpy(), int(cid)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("prefix", nargs="?", help="ditgen's PNG output path without .png (frames PREFIX_0000_f000.png ...)")
    ap.add_argument("--captions", action="store_true", help="print the 180 captions in caption-id order")
    ap.add_argument("--vae", metavar="DIR",
                    help="score 360 true clips sent through the VAE in DIR (e.g. samples/latte-shapes/vae): "
                         "an estimate of the ceiling it puts on the samples (needs torch and diffusers)")
    a = ap.parse_args()
    if sum(map(bool, (a.captions, a.vae, a.prefix))) != 1:
        ap.error("give exactly one of: the frames' prefix, --captions, --vae DIR")
    if a.captions:
        print("\n".join(CAPTIONS))
    elif a.vae:
        report(vae_clips(a.vae))
    else:
        report(ditgen_clips(a.prefix))


if __name__ == "__main__":
    main()

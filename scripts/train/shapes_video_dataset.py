#!/usr/bin/env python3
"""Procedural "moving coloured shapes" clips: the training set of ditgen's
default text-to-video model (samples/latte-shapes).

Each clip is 16 frames of 32x32 RGB: one saturated shape of the image
default's vocabulary (scripts/train/shapes_dataset.py: 6 colours x circle, square,
triangle, star, cross, drawn by the same templates, supersampled 3x) on a
muted background with a gentle gradient, which stays fixed while the shape
moves. Six motions, so 180 captions "a <colour> <shape> <motion>":

  moving left / right / up / down   the shape (16-18 px box) travels 9-11 px
                                    in a straight line at constant speed: an
                                    unambiguous centroid path at 32x32, and a
                                    shape large enough to survive the VAE
                                    (at 10-13 px a star decodes as a blob the
                                    shape measure cannot name: 73% of true
                                    clips were named right after a VAE round
                                    trip, 94% at 16-18 px)
  growing / shrinking               the box grows from 7-9 px to 20-24 px (or
                                    back) about a fixed centre: the centroid
                                    stays, the foreground area changes ~7x

Everything is drawn from one numpy Generator per call, so a seed gives the
same clips on every machine.

    from shapes_video_dataset import generate_clips, CAPTIONS
    clips, caption_ids = generate_clips(n, seed)   # uint8 [n,16,32,32,3], int64 [n]
    /root/venv-ditgen/bin/python scripts/train/shapes_video_dataset.py --out DIR --count 12   # GIF previews
(the reference Python environment, scripts/requirements.txt:
    python3 -m venv /root/venv-ditgen && /root/venv-ditgen/bin/pip install -r scripts/requirements.txt)
"""
from __future__ import annotations

import argparse
import colorsys
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shapes_dataset import COLOUR_NAMES, COLOURS, SHAPES, SUPERSAMPLE, shape_mask_unit  # noqa: E402

MOTIONS = ["moving left", "moving right", "moving up", "moving down", "growing", "shrinking"]
# caption id = (colour_index * len(SHAPES) + shape_index) * len(MOTIONS) + motion_index
CAPTIONS = [f"a {c} {s} {m}" for c in COLOUR_NAMES for s in SHAPES for m in MOTIONS]
FRAMES = 16
SIZE = 32
MARGIN = 1.5


def caption_parts(caption_id: int):
    """(colour, shape, motion) names of a caption id."""
    cs, m = divmod(int(caption_id), len(MOTIONS))
    c, s = divmod(cs, len(SHAPES))
    return COLOUR_NAMES[c], SHAPES[s], MOTIONS[m]


def _path(motion: str, rng: np.random.Generator):
    """Per-frame box (x0, y0, w) arrays of one clip: top-left corner and width."""
    t = np.linspace(0.0, 1.0, FRAMES)
    if motion.startswith("moving"):
        w = rng.uniform(16.0, 18.0)
        travel = rng.uniform(9.0, 11.0)
        lo, hi = MARGIN, SIZE - MARGIN - w
        along0 = rng.uniform(lo, hi - travel)      # the path fits in the frame
        across = np.full(FRAMES, rng.uniform(lo, hi))
        forward = motion in ("moving right", "moving down")  # +x is right, +y is down
        along = along0 + travel * (t if forward else 1.0 - t)
        if motion in ("moving left", "moving right"):
            return along, across, np.full(FRAMES, w)
        return across, along, np.full(FRAMES, w)
    small, large = rng.uniform(7.0, 9.0), rng.uniform(20.0, 24.0)
    w = small + (large - small) * (t if motion == "growing" else 1.0 - t)
    cx = rng.uniform(MARGIN + large / 2, SIZE - MARGIN - large / 2)
    cy = rng.uniform(MARGIN + large / 2, SIZE - MARGIN - large / 2)
    return cx - w / 2, cy - w / 2, w


def render_clip(caption_id: int, rng: np.random.Generator) -> np.ndarray:
    """One clip of `caption_id`; uint8 [FRAMES, SIZE, SIZE, 3]."""
    colour, shape, motion = caption_parts(caption_id)
    # muted background, as the image set draws it
    bg = np.array(colorsys.hsv_to_rgb(rng.uniform(0, 1), rng.uniform(0.0, 0.22), rng.uniform(0.25, 0.72)))
    g_ang, g_amp = rng.uniform(0, 2 * np.pi), rng.uniform(0.0, 0.10)
    fg = np.clip(np.array(COLOURS[colour]) + rng.uniform(-0.06, 0.06, 3), 0, 1)
    x0, y0, w = _path(motion, rng)
    h = w * (0.95 if shape == "star" else 1.0)    # the star's box is not square (image set)

    n = SIZE * SUPERSAMPLE
    c = (np.arange(n) + 0.5) / SUPERSAMPLE
    X, Y = np.meshgrid(c, c)
    u = (X[None] - x0[:, None, None]) / w[:, None, None]
    v = (Y[None] - y0[:, None, None]) / h[:, None, None]
    m = shape_mask_unit(shape, u, v).astype(np.float32)
    cov = m.reshape(FRAMES, SIZE, SUPERSAMPLE, SIZE, SUPERSAMPLE).mean((2, 4))[..., None]

    p = (np.arange(SIZE) + 0.5) / SIZE - 0.5
    PX, PY = np.meshgrid(p, p)
    grad = (np.cos(g_ang) * PX + np.sin(g_ang) * PY)[..., None] * 2 * g_amp
    bgimg = np.clip(bg[None, None, :] + grad, 0, 1)[None]
    clip = bgimg * (1 - cov) + fg[None, None, None, :] * cov
    return (np.clip(clip, 0, 1) * 255 + 0.5).astype(np.uint8)


def generate_clips(n: int, seed: int, caption_ids=None):
    """Deterministic clips: (uint8 [n, FRAMES, SIZE, SIZE, 3], int64 [n]).

    Captions are uniform over the 180 unless given."""
    rng = np.random.default_rng(seed)
    if caption_ids is None:
        caption_ids = rng.integers(0, len(CAPTIONS), n)
    caption_ids = np.asarray(caption_ids, dtype=np.int64)
    return np.stack([render_clip(int(i), rng) for i in caption_ids]), caption_ids


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--count", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    from PIL import Image
    os.makedirs(a.out, exist_ok=True)
    clips, ids = generate_clips(a.count, a.seed)
    for k, (clip, i) in enumerate(zip(clips, ids)):
        frames = [Image.fromarray(f).resize((128, 128), Image.NEAREST) for f in clip]
        name = os.path.join(a.out, f"{k:03d}_{CAPTIONS[i].replace(' ', '_')}.gif")
        frames[0].save(name, save_all=True, append_images=frames[1:], duration=125, loop=0)
    print(f"wrote {a.count} clips to {a.out}")


if __name__ == "__main__":
    main()

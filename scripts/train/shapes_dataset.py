#!/usr/bin/env python3
"""Procedural "coloured shapes" image set used to train ditgen's default model.

One class per (colour, shape) pair, named like "red circle".  Images are small
(32x32 RGB by default): a single saturated shape (circle, square, triangle,
star, cross) at a random position and size on a muted (low-saturation)
background with a gentle linear gradient, so the foreground colour is
dominant and the background can be estimated from the image border.

Shapes are axis-aligned and are defined in the unit square of their own
bounding box (see `shape_mask_unit`), which is what the shape check in the
quality test compares against.

Usage (the reference Python environment, scripts/requirements.txt; numpy and
Pillow of it):
    python3 -m venv /root/venv-ditgen && /root/venv-ditgen/bin/pip install -r scripts/requirements.txt
    /root/venv-ditgen/bin/python scripts/train/shapes_dataset.py --out DIR --per-class N [--size 32] [--seed 0]
writes DIR/<id>_<k>.png and DIR/labels.json ({"classes": {...}, "files": {...}}).

In memory (deterministic for a given seed):
    from shapes_dataset import generate_batch, CLASS_NAMES
    images, labels = generate_batch(n, seed)   # uint8 [n,H,W,3], int64 [n]
"""
from __future__ import annotations

import argparse
import colorsys
import json
import os

import numpy as np

SHAPES = ["circle", "square", "triangle", "star", "cross"]
# Six saturated colours at 60 degree hue spacing (hue in degrees).
COLOURS = {
    "red": (1.00, 0.12, 0.10),
    "yellow": (0.97, 0.88, 0.10),
    "green": (0.12, 0.80, 0.15),
    "cyan": (0.10, 0.85, 0.90),
    "blue": (0.15, 0.25, 1.00),
    "magenta": (0.90, 0.12, 0.90),
}
COLOUR_NAMES = list(COLOURS)
COLOUR_HUES = {"red": 0.0, "yellow": 60.0, "green": 120.0, "cyan": 180.0,
               "blue": 240.0, "magenta": 300.0}
# class id = colour_index * len(SHAPES) + shape_index
CLASS_NAMES = [f"{c} {s}" for c in COLOUR_NAMES for s in SHAPES]
NUM_CLASSES = len(CLASS_NAMES)

STAR_INNER = 0.5      # inner/outer radius ratio of the 5-pointed star
CROSS_ARM = 0.36      # arm width of the plus-shaped cross, fraction of bbox
SUPERSAMPLE = 3


def _star_polygon():
    pts = []
    for i in range(10):
        r = 1.0 if i % 2 == 0 else STAR_INNER
        a = np.pi / 2 + i * np.pi / 5          # first point straight up
        pts.append((r * np.cos(a), -r * np.sin(a)))
    pts = np.array(pts)
    lo, hi = pts.min(0), pts.max(0)
    return (pts - lo) / (hi - lo)                # normalised to its own bbox


_STAR = _star_polygon()
_TRIANGLE = np.array([[0.5, 0.0], [1.0, 1.0], [0.0, 1.0]])


def _in_polygon(x, y, poly):
    """Even-odd rule point-in-polygon, vectorised over x,y arrays."""
    inside = np.zeros(x.shape, dtype=bool)
    n = len(poly)
    for i in range(n):
        x0, y0 = poly[i]
        x1, y1 = poly[(i + 1) % n]
        cond = (y0 > y) != (y1 > y)
        with np.errstate(divide="ignore", invalid="ignore"):
            xc = x0 + (y - y0) * (x1 - x0) / (y1 - y0)
        inside ^= cond & (x < xc)
    return inside


def shape_mask_unit(shape: str, u, v):
    """Boolean mask for coordinates u,v in [0,1] of the shape's bounding box."""
    if shape == "circle":
        return (u - 0.5) ** 2 + (v - 0.5) ** 2 <= 0.25
    if shape == "square":
        return (u >= 0) & (u <= 1) & (v >= 0) & (v <= 1)
    if shape == "triangle":
        return _in_polygon(u, v, _TRIANGLE)
    if shape == "star":
        return _in_polygon(u, v, _STAR)
    if shape == "cross":
        lo, hi = 0.5 - CROSS_ARM / 2, 0.5 + CROSS_ARM / 2
        inb = (u >= 0) & (u <= 1) & (v >= 0) & (v <= 1)
        return inb & (((u >= lo) & (u <= hi)) | ((v >= lo) & (v <= hi)))
    raise ValueError(shape)


def classify(img: np.ndarray):
    """img uint8 [H,W,3] -> (colour name or None, shape name or None).

    The quality measure of the default model; src/eval/shape_classifier.cpp
    is its C++ port (tests/fixtures/shapes checks they agree)."""
    x = img.astype(np.float32) / 255.0
    H, W, _ = x.shape
    border = np.concatenate([x[0], x[-1], x[:, 0], x[:, -1]])
    bg = np.median(border, axis=0)
    d = np.sqrt(((x - bg) ** 2).sum(-1))
    mask = d > 0.3
    if mask.sum() < 4:
        return None, None
    fg = x[mask].mean(0)
    mx, mn = fg.max(), fg.min()
    if mx - mn < 1e-3:
        return None, None
    r, g, b = fg
    if mx == r:
        hue = 60 * (((g - b) / (mx - mn)) % 6)
    elif mx == g:
        hue = 60 * ((b - r) / (mx - mn) + 2)
    else:
        hue = 60 * ((r - g) / (mx - mn) + 4)
    colour = min(COLOUR_NAMES,
                 key=lambda c: min(abs(hue - COLOUR_HUES[c]), 360 - abs(hue - COLOUR_HUES[c])))
    ys, xs = np.nonzero(mask)
    y0, y1, x0, x1 = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
    sub = mask[y0:y1, x0:x1]
    h, w = sub.shape
    u, v = np.meshgrid((np.arange(w) + 0.5) / w, (np.arange(h) + 0.5) / h)
    best, shape = -1.0, None
    for s in SHAPES:
        t = shape_mask_unit(s, u, v)
        iou = (t & sub).sum() / max(1, (t | sub).sum())
        if iou > best:
            best, shape = iou, s
    return colour, shape


def render(label: int, rng: np.random.Generator, size: int = 32) -> np.ndarray:
    """Render one image of class `label`; returns uint8 [size,size,3]."""
    colour = COLOUR_NAMES[label // len(SHAPES)]
    shape = SHAPES[label % len(SHAPES)]
    # muted background: low saturation, mid value, linear gradient
    h = rng.uniform(0, 1)
    s = rng.uniform(0.0, 0.22)
    val = rng.uniform(0.25, 0.72)
    bg = np.array(colorsys.hsv_to_rgb(h, s, val))
    g_ang = rng.uniform(0, 2 * np.pi)
    g_amp = rng.uniform(0.0, 0.10)
    # shape box (slightly wider than tall for the star, which is not square)
    bs = rng.uniform(0.45, 0.75) * size
    bw, bh = bs, bs
    if shape == "star":
        bh = bs * 0.95
    margin = 1.5
    x0 = rng.uniform(margin, size - margin - bw)
    y0 = rng.uniform(margin, size - margin - bh)
    fg = np.clip(np.array(COLOURS[colour]) + rng.uniform(-0.06, 0.06, 3), 0, 1)

    n = size * SUPERSAMPLE
    c = (np.arange(n) + 0.5) / SUPERSAMPLE
    X, Y = np.meshgrid(c, c)
    m = shape_mask_unit(shape, (X - x0) / bw, (Y - y0) / bh).astype(np.float32)
    cov = m.reshape(size, SUPERSAMPLE, size, SUPERSAMPLE).mean((1, 3))[..., None]

    p = (np.arange(size) + 0.5) / size - 0.5
    PX, PY = np.meshgrid(p, p)
    grad = (np.cos(g_ang) * PX + np.sin(g_ang) * PY)[..., None] * 2 * g_amp
    bgimg = np.clip(bg[None, None, :] + grad, 0, 1)
    img = bgimg * (1 - cov) + fg[None, None, :] * cov
    return (np.clip(img, 0, 1) * 255 + 0.5).astype(np.uint8)


def generate_batch(n: int, seed: int, size: int = 32, labels=None):
    """Deterministic batch: (uint8 [n,size,size,3], int64 [n]).

    Labels are uniform over classes unless given explicitly."""
    rng = np.random.default_rng(seed)
    if labels is None:
        labels = rng.integers(0, NUM_CLASSES, n)
    labels = np.asarray(labels, dtype=np.int64)
    imgs = np.stack([render(int(l), rng, size) for l in labels])
    return imgs, labels


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--per-class", type=int, default=8)
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    from PIL import Image
    os.makedirs(a.out, exist_ok=True)
    labels = np.repeat(np.arange(NUM_CLASSES), a.per_class)
    imgs, labels = generate_batch(len(labels), a.seed, a.size, labels)
    files = {}
    for i, (im, l) in enumerate(zip(imgs, labels)):
        name = f"{int(l):02d}_{i % a.per_class:04d}.png"
        Image.fromarray(im).save(os.path.join(a.out, name))
        files[name] = int(l)
    with open(os.path.join(a.out, "labels.json"), "w") as f:
        json.dump({"classes": {str(i): c for i, c in enumerate(CLASS_NAMES)},
                   "files": files}, f, indent=1)
    print(f"wrote {len(files)} images of {NUM_CLASSES} classes to {a.out}")


if __name__ == "__main__":
    main()

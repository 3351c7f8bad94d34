#!/usr/bin/env python3
"""Quality measure of ditgen's default video model (samples/latte-shapes):
does a generated clip show the caption's colour, shape and motion?

Colour and shape: scripts/shapes_dataset.py's classify() on the frame with
the most foreground (the largest view of the shape: any frame of a
translation, the last of "growing", the first of "shrinking").
Motion: per frame, the foreground is the pixels further than 0.3 (RGB in
[0, 1]) from the median colour of that frame's border (classify()'s rule);
its centroid and area are averaged over the first and the last 4 frames.
A centroid shift of at least 4 px is a translation, named by its larger
axis and sign (+x right, +y down); otherwise an area ratio last/first above
1.5 is "growing", below 1/1.5 "shrinking"; anything else is no motion.
src/eval/motion_measure.cpp is its C++ port (the quality test's measure).

Scoring all 180 captions (as the quality test does, in C++):
    python scripts/video_quality.py --captions > /tmp/captions.txt
    ./build/ditgen --config configs/default.json --prompt-file /tmp/captions.txt \
        --set output.format=png --set output.grid=false --output /tmp/all/c.png
    python scripts/video_quality.py /tmp/all/c     # reads c_0000_f000.png ...
prints colour / shape / motion agreement and the shape confusions.
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("prefix", nargs="?", help="ditgen's PNG output path without .png (frames PREFIX_0000_f000.png ...)")
    ap.add_argument("--captions", action="store_true", help="print the 180 captions in caption-id order")
    a = ap.parse_args()
    if a.captions:
        print("\n".join(CAPTIONS))
        return
    if not a.prefix:
        ap.error("give the frames' prefix or --captions")
    from PIL import Image
    ok = collections.Counter()
    named = collections.Counter()  # (asked shape, named shape) -> clips
    for cid in range(len(CAPTIONS)):
        clip = np.stack([np.array(Image.open(f"{a.prefix}_{cid:04d}_f{k:03d}.png").convert("RGB"))
                         for k in range(FRAMES)])
        colour_shape = named_colour_shape(clip)
        for k, v in score_clip(clip, cid, colour_shape).items():
            ok[k] += v
        named[(caption_parts(cid)[1], colour_shape[1] or "no shape")] += 1
    n = len(CAPTIONS)
    print(", ".join(f"{k} {ok[k]}/{n} ({100 * ok[k] / n:.1f}%)" for k in ("colour", "shape", "motion")))
    per = n // len(SHAPES)
    for s in SHAPES:
        other = ", ".join(f"{b} {v}" for (t, b), v in sorted(named.items()) if t == s and b != s)
        print(f"  {s:8s} {named[(s, s)]}/{per}" + (f"  (named {other})" if other else ""))


if __name__ == "__main__":
    main()

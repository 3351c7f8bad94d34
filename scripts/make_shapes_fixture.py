#!/usr/bin/env python3
"""Fixture for the C++ quality measures (tests/eval): images of the shapes set
with what the Python reference says about them.

Writes tests/fixtures/shapes/:
  images.u8     N x 32 x 32 x 3 uint8, row-major, no header
  expected.json {"count": N, "height": 32, "width": 32,
                 "labels": [...], "python_colour": [...], "python_shape": [...],
                 "metrics": [{"a": i, "b": j, "psnr": .., "ssim": ..}, ...]}
Images: 2 clean renders per class, then the same degraded (box blur + noise,
a shift of the colour) so the classifier is checked on imperfect inputs too
(the C++ port must give the Python answer on every image, right or wrong).
PSNR/SSIM references are computed here with numpy/scipy's separable Gaussian
filter (truncated to 11 taps, valid region), a different route from the C++
window loop.

Usage: python scripts/make_shapes_fixture.py [--out tests/fixtures/shapes]
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shapes_dataset import COLOUR_NAMES, NUM_CLASSES, SHAPES, classify, generate_batch  # noqa: E402


def degrade(imgs, rng):
    x = imgs.astype(np.float32)
    k = np.ones(3) / 3
    for axis in (1, 2):  # 3-tap box blur along H and W
        x = np.apply_along_axis(lambda r: np.convolve(r, k, mode="same"), axis, x)
    x += rng.normal(0, 12, x.shape)
    x += rng.uniform(-20, 20, (len(x), 1, 1, 3))
    return np.clip(x + 0.5, 0, 255).astype(np.uint8)


def psnr(a, b):
    mse = ((a.astype(np.float64) - b) ** 2).mean()
    return float("inf") if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


def ssim(a, b):
    g = np.exp(-((np.arange(11) - 5.0) ** 2) / (2 * 1.5 ** 2))
    g /= g.sum()

    def filt(x):  # valid-region separable Gaussian filter of an [H, W] array
        h, w = x.shape
        rows = np.stack([x[:, i:i + 11] @ g for i in range(w - 10)], axis=1)
        return np.stack([g @ rows[i:i + 11] for i in range(h - 10)], axis=0)

    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    vals = []
    for c in range(a.shape[2]):
        x, y = a[..., c].astype(np.float64), b[..., c].astype(np.float64)
        mx, my = filt(x), filt(y)
        vx, vy, cxy = filt(x * x) - mx * mx, filt(y * y) - my * my, filt(x * y) - mx * my
        s = ((2 * mx * my + c1) * (2 * cxy + c2)) / ((mx * mx + my * my + c1) * (vx + vy + c2))
        vals.append(s.mean())
    return float(np.mean(vals))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "shapes"))
    a = ap.parse_args()
    labels = np.repeat(np.arange(NUM_CLASSES), 2)
    clean, labels = generate_batch(len(labels), seed=424242, labels=labels)
    rng = np.random.default_rng(7)
    noisy = degrade(clean, rng)
    imgs = np.concatenate([clean, noisy])
    labels = np.concatenate([labels, labels])
    guesses = [classify(im) for im in imgs]
    n_clean = len(clean)
    pairs = [(0, n_clean), (5, n_clean + 5), (17, n_clean + 17), (3, 4), (10, 10)]
    metrics = [{"a": i, "b": j, "psnr": psnr(imgs[i], imgs[j]) if i != j else None, "ssim": ssim(imgs[i], imgs[j])}
               for i, j in pairs]
    os.makedirs(a.out, exist_ok=True)
    imgs.tofile(os.path.join(a.out, "images.u8"))
    with open(os.path.join(a.out, "expected.json"), "w") as f:
        json.dump({"count": len(imgs), "height": 32, "width": 32, "clean_count": n_clean,
                   "labels": labels.tolist(),
                   "python_colour": [COLOUR_NAMES.index(c) if c else -1 for c, _ in guesses],
                   "python_shape": [SHAPES.index(s) if s else -1 for _, s in guesses],
                   "metrics": metrics}, f, indent=1)
    right = [(c == COLOUR_NAMES[l // 5]) and (s == SHAPES[l % 5]) for (c, s), l in zip(guesses, labels)]
    print(f"wrote {len(imgs)} images; python classifier right on clean {sum(right[:n_clean])}/{n_clean}, "
          f"degraded {sum(right[n_clean:])}/{n_clean}")


if __name__ == "__main__":
    main()

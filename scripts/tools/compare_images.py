#!/usr/bin/env python3
"""PSNR of the PNGs of one output directory against another's (same names).

    /root/venv-ditgen/bin/python scripts/tools/compare_images.py REFERENCE_DIR OTHER_DIR [--glob 'name_0*.png']

Prints one line: the number of images, the median / minimum / mean PSNR in
dB (identical images count as inf and are left out of the mean). Used for
the naive-patch figures of docs/parallel.md; needs numpy and Pillow, as in
the reference Python environment (scripts/requirements.txt):
    python3 -m venv /root/venv-ditgen && /root/venv-ditgen/bin/pip install -r scripts/requirements.txt
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from PIL import Image


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return math.inf if mse == 0 else 10 * math.log10(255.0**2 / mse)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("reference", type=Path)
    ap.add_argument("other", type=Path)
    ap.add_argument("--glob", default="*_[0-9][0-9][0-9][0-9].png", help="which files (default: numbered outputs)")
    args = ap.parse_args()
    files = sorted(args.reference.glob(args.glob))
    if not files:
        sys.exit(f"{args.reference}: no files match {args.glob}")
    values = []
    for f in files:
        g = args.other / f.name
        if not g.exists():
            sys.exit(f"{g}: missing (it is in {args.reference})")
        a, b = (np.asarray(Image.open(p).convert("RGB")) for p in (f, g))
        if a.shape != b.shape:
            sys.exit(f"{g}: {b.shape} against {a.shape} in {f}")
        values.append(psnr(a, b))
    v = np.array(values)
    finite = v[np.isfinite(v)]
    mean = f"{finite.mean():.2f}" if finite.size else "inf"
    print(f"{len(v)} images: PSNR median {np.median(v):.2f} dB, min {v.min():.2f}, mean {mean}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""PAB benchmark: time per denoising step and output change, PAB off vs on.

    python3 scripts/bench_pab.py --model /tmp/DiT-XL-2-256-random [--steps 50] [--labels 207]
        [--ditgen build/ditgen] [--threads 2] [--out /tmp/ditgen-pab]

Runs ditgen with the config's DDIM sampler for each PAB configuration (off;
spatial range 2 / 3 / 4 in the window (100, 800) with MLP broadcast of every
block, range = spatial range + 1), all from the same seed, and prints per
configuration: seconds per step (the mean over the run's steps, from ditgen's
progress lines), speed-up against PAB off, the blocks reused, and PSNR and
SSIM of the decoded images against PAB off (meaningful on a trained model;
on random weights they only show that outputs change). Needs numpy and
Pillow for the image metrics (any Python with them; no torch).
A benchmark, not a test; run it on an otherwise idle machine.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

import numpy as np
from PIL import Image

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


def ssim(a, b):
    """Mean SSIM over 8x8 windows (stride 4) of the luma, constants of Wang et al. 2004."""
    def luma(x):
        x = x.astype(np.float64)
        return 0.299 * x[..., 0] + 0.587 * x[..., 1] + 0.114 * x[..., 2]
    x, y = luma(a), luma(b)
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    vals = []
    for i in range(0, x.shape[0] - 7, 4):
        for j in range(0, x.shape[1] - 7, 4):
            p, q = x[i:i + 8, j:j + 8], y[i:i + 8, j:j + 8]
            mp, mq = p.mean(), q.mean()
            vp, vq, cov = p.var(), q.var(), ((p - mp) * (q - mq)).mean()
            vals.append(((2 * mp * mq + c1) * (2 * cov + c2)) / ((mp ** 2 + mq ** 2 + c1) * (vp + vq + c2)))
    return float(np.mean(vals))


def run(args, name, pab):
    out_dir = os.path.join(args.out, name)
    os.makedirs(out_dir, exist_ok=True)
    cmd = [args.ditgen, "--config", os.path.join(REPO, "configs", "dit-xl-2-256.json"),
           "--set", f"model.path={args.model}", "--steps", str(args.steps), "--seed", "0",
           "--set", f"generate.class_labels={json.dumps(args.labels)}", "--set", "generate.scheduler=ddim",
           "--threads", str(args.threads), "--output", os.path.join(out_dir, "img.png"),
           "--pab-stats", os.path.join(out_dir, "pab.json")]
    if pab:
        cmd += ["--set", "pab=" + json.dumps(pab)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{name}: ditgen failed ({p.returncode}):\n{p.stderr}")
    # Plain progress lines: "denoise: step i/N 1.23 s/it", a running average
    # over the steps so far: the last one is the run's mean time per step.
    avgs = [float(m.group(2)) for m in re.finditer(r"step (\d+)/\d+ ([0-9.]+) s/it", p.stderr)]
    images = sorted(f for f in os.listdir(out_dir) if f.endswith(".png"))
    stats = json.load(open(os.path.join(out_dir, "pab.json"))) if pab else {}
    return avgs[-1], [np.asarray(Image.open(os.path.join(out_dir, f)).convert("RGB")) for f in images], stats


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--ditgen", default=os.path.join(REPO, "build", "ditgen"))
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--labels", type=json.loads, default=[207])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default="/tmp/ditgen-pab")
    ap.add_argument("--layers", type=int, default=28, help="blocks of the model (for the MLP block list)")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()

    configs = [("off", None)]
    for r in (2, 3, 4):
        configs.append((f"spatial{r}+mlp", {"spatial": {"range": r, "threshold": [100, 800]},
                                            "mlp": {"range": r + 1, "threshold": [100, 800],
                                                    "blocks": list(range(args.layers))}}))
    # Two rounds, alternating configurations, to spread a shared machine's
    # noise; each configuration keeps its faster round.
    results = {}
    for _ in range(args.rounds):
        for name, pab in configs:
            r = run(args, name, pab)
            if name not in results or r[0] < results[name][0]:
                results[name] = r
    base_t, base_imgs, _ = results["off"]
    print(f"model {args.model}, {args.steps} DDIM steps, labels {args.labels}, {args.threads} threads")
    print(f"{'config':<14} {'s/step':>8} {'speed-up':>9} {'spatial reused':>15} {'mlp reused':>11} {'PSNR dB':>8} {'SSIM':>6}")
    for name, (t, imgs, stats) in results.items():
        kinds = stats.get("kinds", {})
        sr = kinds.get("spatial", {}).get("reused", 0)
        mr = kinds.get("mlp", {}).get("reused", 0)
        ps = statistics.mean(psnr(a, b) for a, b in zip(imgs, base_imgs))
        ss = statistics.mean(ssim(a, b) for a, b in zip(imgs, base_imgs))
        print(f"{name:<14} {t:8.3f} {base_t / t:8.2f}x {sr:15d} {mr:11d} {ps:8.2f} {ss:6.3f}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Benchmark Wan 2.1 T2V-1.3B's two heavy stages on random weights of the
real sizes: one transformer forward (batch 2 = one CFG step) at 17 frames
of 256 x 256, and the Wan VAE decode of those 17 frames; ditgen against
diffusers in float32 and bfloat16: median seconds and peak RSS (issue 34's
benchmark).  A benchmark, not a test.

Usage (from the repository root, after building the bench programs; the
Wan-era Python environment, scripts/fixtures/requirements-wan.txt:
python3 -m venv /root/venv-wan && /root/venv-wan/bin/pip install -r
scripts/fixtures/requirements-wan.txt):

    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DDITGEN_BENCHMARKS=ON
    cmake --build build --target bench_forward bench_vae_decode -j
    /root/venv-wan/bin/python scripts/bench/bench_wan.py \\
        [--bench-dir build/scripts/bench/cpp] [--workdir /tmp/ditgen-bench] \\
        [--threads 2] [--repeat 3] [--warmup 1] [--rounds 1] \\
        [--dtypes float32,bfloat16] [--parts transformer,vae] [--small]

Needs torch and diffusers (the Wan reference environment: torch 2.x,
diffusers 0.42).  What it does:

  1. Creates once, cached under --workdir (never inside the repository), a
     random-weight model directory <workdir>/Wan2.1-T2V-1.3B-random/:
     model_index.json, transformer/ (WanTransformer3DModel from
     configs/models/Wan2.1-T2V-1.3B-Diffusers/transformer/config.json,
     diffusers' own initialisation after torch.manual_seed(0), float32
     safetensors, about 5.7 GB) and vae/ (AutoencoderKLWan from that
     directory's vae/config.json).  --small writes a tiny model of the same
     layout instead (2 layers, 2 heads of 16; VAE base_dim 16), to check
     the script itself in seconds; its figures mean nothing.  The model is
     written by a child process: a child's ru_maxrss starts from its
     parent's at fork, so the parent never imports torch.
  2. Runs --rounds rounds, each, for every dtype of --dtypes and part of
     --parts, diffusers and then ditgen, every measurement its own
     subprocess so that each peak RSS (ru_maxrss) is that engine's alone:
       transformer: latents (2, 16, 5, 32, 32) ~ N(0, 1) (17 frames ->
         5 latent frames; 256 / 8 = 32), timestep 500, text embeddings
         (2, 512, 4096) ~ N(0, 1) (WanPipeline's 512 rows); diffusers:
         WanTransformer3DModel.from_pretrained(...).to(dtype) under
         torch.inference_mode(); ditgen: bench_forward --model DIR
         --batch 2 --frames 5 --latent-size 32 --text-tokens 512.
       vae: latents (1, 16, 5, 32, 32) -> 17 frames of 256 x 256;
         diffusers: AutoencoderKLWan.decode (its per-latent-frame causal
         cache); ditgen: bench_vae_decode --height 256 --width 256
         --frames 17, through the VAE seam's stream as the pipeline decodes.
     Each run does --warmup untimed and --repeat timed passes; the reported
     time is the median of all timed passes over all rounds.
  3. Prints a table: per part, engine and dtype, median seconds, peak RSS,
     and ditgen's time as a fraction of diffusers' bfloat16 time and of the
     same dtype's (issue 34's goals: transformer <= 0.85x and VAE decode
     <= 0.8x diffusers' bfloat16 time, peak RSS <= diffusers').

Both engines run with the same thread count (torch.set_num_threads and
--threads).  The machine should be otherwise idle: a concurrent build or
test run moves both engines' figures by more than the goals' margins.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PUBLISHED = REPO / "configs" / "models" / "Wan2.1-T2V-1.3B-Diffusers"

# The sizes of the benchmark: 17 frames of 256 x 256 -> (16, 5, 32, 32) latents.
FRAMES, SIZE = 17, 256


def read_config(path: Path) -> dict:
    cfg = json.loads(path.read_text())
    return {k: v for k, v in cfg.items() if not k.startswith("_")}


def make_model(root: Path, small: bool) -> None:
    """The random-weight model directory (once: kept when complete)."""
    import torch
    from diffusers import AutoencoderKLWan, WanTransformer3DModel

    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    tcfg = read_config(PUBLISHED / "transformer" / "config.json")
    vcfg = read_config(PUBLISHED / "vae" / "config.json")
    if small:
        tcfg.update(num_attention_heads=2, attention_head_dim=16, num_layers=2, ffn_dim=64, text_dim=64, freq_dim=32)
        vcfg.update(base_dim=16)
    torch.manual_seed(0)
    print(f"writing {root} (random weights{', small' if small else ''}) ...", file=sys.stderr, flush=True)
    WanTransformer3DModel(**tcfg).save_pretrained(root / "transformer", safe_serialization=True)
    AutoencoderKLWan(**vcfg).save_pretrained(root / "vae", safe_serialization=True)
    shutil.copy(PUBLISHED / "model_index.json", root / "model_index.json")
    (root / ".complete").write_text("")


# One diffusers measurement, run in a child process (python -c) so that its
# ru_maxrss is its own; prints one JSON line.
TORCH_CHILD = r"""
import json, resource, sys, time
import torch
a = json.loads(sys.argv[1])
torch.set_num_threads(a["threads"])
dtype = getattr(torch, a["dtype"])
g = torch.Generator().manual_seed(0)
times = []
with torch.inference_mode():
    if a["part"] == "transformer":
        from diffusers import WanTransformer3DModel
        m = WanTransformer3DModel.from_pretrained(a["model"], subfolder="transformer").to(dtype).eval()
        x = torch.randn(2, m.config.in_channels, a["latent_frames"], a["latent"], a["latent"], generator=g).to(dtype)
        text = torch.randn(2, 512, m.config.text_dim, generator=g).to(dtype)
        t = torch.tensor([500.0, 500.0])
        run = lambda: m(hidden_states=x, timestep=t, encoder_hidden_states=text, return_dict=False)[0]
    else:
        from diffusers import AutoencoderKLWan
        m = AutoencoderKLWan.from_pretrained(a["model"], subfolder="vae").to(dtype).eval()
        z = torch.randn(1, m.config.z_dim, a["latent_frames"], a["latent"], a["latent"], generator=g).to(dtype)
        run = lambda: m.decode(z, return_dict=False)[0]
    for i in range(a["warmup"] + a["repeat"]):
        t0 = time.perf_counter()
        out = run()
        dt = time.perf_counter() - t0
        if i >= a["warmup"]:
            times.append(dt)
print(json.dumps({"seconds": times, "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "shape": list(out.shape)}))
"""


def run_torch(args, model: Path, part: str, dtype: str) -> dict:
    payload = dict(part=part, dtype=dtype, model=str(model), threads=args.threads, warmup=args.warmup,
                   repeat=args.repeat, latent=SIZE // 8, latent_frames=(FRAMES - 1) // 4 + 1)
    out = subprocess.run([sys.executable, "-c", TORCH_CHILD, json.dumps(payload)], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def run_ditgen(args, model: Path, part: str, dtype: str) -> dict:
    common = ["--dtype", dtype, "--threads", str(args.threads), "--repeat", str(args.repeat),
              "--warmup", str(args.warmup)]
    if part == "transformer":
        cmd = [str(args.bench_dir / "bench_forward"), "--model", str(model), "--batch", "2",
               "--frames", str((FRAMES - 1) // 4 + 1), "--latent-size", str(SIZE // 8), "--text-tokens", "512"]
        key = "forward_all"
    else:
        cmd = [str(args.bench_dir / "bench_vae_decode"), "--model", str(model), "--height", str(SIZE),
               "--width", str(SIZE), "--frames", str(FRAMES)]
        key = "decode_all"
    out = subprocess.run(cmd + common, check=True, capture_output=True, text=True).stdout
    figures = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    return {"seconds": [float(s) for s in figures[key].split(",")],
            "peak_rss_bytes": int(figures["peak_rss_bytes"])}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bench-dir", type=Path, default=REPO / "build" / "scripts" / "bench" / "cpp")
    p.add_argument("--workdir", type=Path, default=Path("/tmp/ditgen-bench"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--parts", default="transformer,vae")
    p.add_argument("--small", action="store_true", help="a tiny model of the same layout: checks the script only")
    p.add_argument("--make-model", type=Path, help=argparse.SUPPRESS)  # the child that writes the model
    args = p.parse_args()
    if args.make_model:
        make_model(args.make_model, args.small)
        return
    if REPO in args.workdir.resolve().parents:
        sys.exit("--workdir must lie outside the repository (the weights are gigabytes)")
    dtypes, parts = args.dtypes.split(","), args.parts.split(",")
    model = args.workdir / ("Wan-tiny-random" if args.small else "Wan2.1-T2V-1.3B-random")
    if not (model / ".complete").exists():
        # In a child: a process's peak RSS starts at its parent's at fork,
        # so this one must never hold torch or the weights.
        subprocess.run([sys.executable, __file__, "--make-model", str(model)] + (["--small"] if args.small else []),
                       check=True)

    times: dict = {}
    rss: dict = {}
    for _ in range(args.rounds):
        for part in parts:
            for dtype in dtypes:
                for engine, run in (("diffusers", run_torch), ("ditgen", run_ditgen)):
                    r = run(args, model, part, dtype)
                    times.setdefault((part, engine, dtype), []).extend(r["seconds"])
                    rss[(part, engine, dtype)] = max(rss.get((part, engine, dtype), 0), r["peak_rss_bytes"])
                    print(f"{part} {engine} {dtype}: {statistics.median(r['seconds']):.3f} s, "
                          f"peak RSS {r['peak_rss_bytes'] / 2**30:.2f} GiB", file=sys.stderr, flush=True)

    print(f"\nWan 2.1 T2V-1.3B{' (SMALL: script check only)' if args.small else ''}, random weights: "
          f"transformer forward CFG batch 2 at {FRAMES} x {SIZE} x {SIZE}, VAE decode of those {FRAMES} frames; "
          f"{args.threads} threads, median of {args.rounds} x {args.repeat} passes\n")
    print("| part | engine | dtype | seconds | peak RSS GiB | / diffusers bf16 time | / diffusers same dtype |")
    print("|---|---|---|---|---|---|---|")
    for part in parts:
        base = times.get((part, "diffusers", "bfloat16"))
        for engine in ("diffusers", "ditgen"):
            for dtype in dtypes:
                t = statistics.median(times[(part, engine, dtype)])
                same = statistics.median(times[(part, "diffusers", dtype)])
                vs_bf16 = f"{t / statistics.median(base):.2f}x" if base else "-"
                print(f"| {part} | {engine} | {dtype} | {t:.3f} | {rss[(part, engine, dtype)] / 2**30:.2f} | "
                      f"{vs_bf16} | {t / same:.2f}x |")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""ditgen's CPU performance against PyTorch, in one run on one machine: the
GEMM peaks, DiT-XL/2 forward (float32 and bfloat16), the SD-sized VAE decode
of a 256x256 and a 512x512 image (float32 and bfloat16), T5-XXL encoding 120
tokens (bfloat16) and a Latte-1-sized forward (bfloat16).  A benchmark, not
a test.

Usage (from the repository root, after building the bench programs, which
need -DDITGEN_BENCHMARKS=ON; the reference Python environment is
scripts/requirements.txt):

    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DDITGEN_BENCHMARKS=ON
    cmake --build build --target bench_forward bench_vae_decode -j
    python3 -m venv /root/venv-ditgen && /root/venv-ditgen/bin/pip install -r scripts/requirements.txt
    /root/venv-ditgen/bin/python scripts/bench/bench_cpu.py [--parts gemm,dit,vae,t5,latte]
        [--workdir /tmp/ditgen-bench] [--build build] [--threads 2] [--rounds 2]

Needs torch, diffusers, transformers, safetensors (the virtual environment
above, outside the repository).  Random-weight models of the real sizes are made
once, cached under --workdir (never in the repository): DiT-XL/2-256
(2.9 GB, scripts/bench/bench_dit_forward.py), an SD-sized AutoencoderKL (335 MB),
a T5-XXL encoder in bfloat16 (9.5 GB, scripts/models/make_t5_xxl_random.py) and a
Latte-1-sized transformer (2.7 GB, scripts/models/make_random_latte.py).

What is timed (every measurement its own subprocess, so each peak RSS is
that engine's alone; engines alternate within a round; the figure is the
median of all timed runs over all rounds; the same thread count for both):
  gemm   ditgen's GEMM op (bench_forward --sgemm 4096: oneDNN; bfloat16 with
         the float32 input rounded inside the op) and torch.mm, per dtype:
         the peak each line's GFLOP/s is compared with (best run median)
  dit    one DiT-XL/2 forward at 256x256, batch 2 (a CFG step): diffusers'
         DiTTransformer2DModel (.to(dtype)) against bench_forward
  vae    one decode of a 256x256 and of a 512x512 image: diffusers'
         AutoencoderKL.decode (.to(dtype)) against bench_vae_decode
  t5     T5-XXL encoding one prompt of 120 tokens (no padding), weights
         resident: transformers' T5EncoderModel in bfloat16 against
         bench_forward --text-encoder --dtype bfloat16 (row-major weights, as
         the pipeline runs it, and --pack-weights)
  latte  one Latte-1-sized forward (28 + 28 blocks, 1152 wide), 16 frames of
         32x32 latents (256x256 video), a CFG batch of 2, 120 text tokens of
         4096 channels: diffusers' LatteTransformer3DModel in bfloat16
         against bench_forward --dtype bfloat16
FLOP counts come from the models' own structure: for diffusers' side,
forward hooks on every Linear / Conv2d and the attention products counted
in the child (the same count is used for ditgen's line).  Each line prints
seconds, GFLOP/s, the fraction of ditgen's GEMM peak in that dtype, peak
RSS, and ditgen's time over the reference's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_dit_forward as dit  # noqa: E402  (model creation, FLOP count, output parsing)

PARTS = ("gemm", "dit", "vae", "t5", "latte")
DTYPES = ("float32", "bfloat16")


# ---------------------------------------------------------------------------
# Children (run in subprocesses)


def torch_dtype(name):
    import torch

    return {"float32": torch.float32, "bfloat16": torch.bfloat16}[name]


def count_flops(module, run):
    """FLOP of one call of run(): 2*MACs of every Linear / Conv2d (hooks) plus
    the attention products of diffusers' Attention modules (QK^T and PV),
    counted from their inputs' shapes."""
    import torch

    total = [0.0]

    def lin(m, inp, out):
        total[0] += 2.0 * inp[0].numel() / inp[0].shape[-1] * m.in_features * m.out_features

    def conv(m, inp, out):
        k = m.kernel_size[0] * m.kernel_size[1] * m.in_channels // m.groups
        total[0] += 2.0 * out.numel() * k

    hooks = []
    for m in module.modules():
        if isinstance(m, torch.nn.Linear):
            hooks.append(m.register_forward_hook(lin))
        elif isinstance(m, torch.nn.Conv2d):
            hooks.append(m.register_forward_hook(conv))
    orig = torch.nn.functional.scaled_dot_product_attention

    def sdpa(q, k, v, *a, **kw):
        # q (..., Lq, d), k (..., Lk, d), v (..., Lk, dv)
        batch = q.numel() / (q.shape[-2] * q.shape[-1])
        total[0] += 2.0 * batch * q.shape[-2] * k.shape[-2] * (q.shape[-1] + v.shape[-1])
        return orig(q, k, v, *a, **kw)

    torch.nn.functional.scaled_dot_product_attention = sdpa
    try:
        with torch.inference_mode():
            run()
    finally:
        torch.nn.functional.scaled_dot_product_attention = orig
        for h in hooks:
            h.remove()
    return total[0]


def timed(run, warmup, repeat):
    vals = []
    for r in range(warmup + repeat):
        t0 = time.perf_counter()
        run()
        dt = time.perf_counter() - t0
        if r >= warmup:
            vals.append(dt)
    return vals


def report(vals, flop):
    import resource

    print(f"flop {flop:.6g}")
    print("forward_all " + ",".join(f"{v:.4f}" for v in vals))
    print(f"peak_rss_bytes {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}")


def child(args) -> None:
    import torch

    torch.set_num_threads(args.threads)
    dt = torch_dtype(args.dtype)
    g = torch.Generator().manual_seed(0)
    with torch.inference_mode():
        if args.child == "vae":
            from diffusers import AutoencoderKL

            vae = AutoencoderKL.from_pretrained(args.model, torch_dtype=dt).eval()
            side = args.size // (2 ** (len(vae.config.block_out_channels) - 1))
            z = torch.randn(1, vae.config.latent_channels, side, side, generator=g).to(dt)

            def run():
                return vae.decode(z).sample

            flop = count_flops(vae.decoder, run) + count_flops(vae.post_quant_conv, lambda: vae.post_quant_conv(z))
        elif args.child == "t5":
            from transformers import T5EncoderModel

            enc = T5EncoderModel.from_pretrained(args.model, subfolder="text_encoder", torch_dtype=dt).eval()
            vocab = enc.config.vocab_size
            ids = torch.tensor([[(7919 * i + 1) % vocab for i in range(args.tokens)]])
            mask = torch.ones_like(ids)

            def run():
                return enc(input_ids=ids, attention_mask=mask).last_hidden_state

            flop = count_flops(enc, run)
            # T5's attention is eager (matmuls, not SDPA): add its products.
            c = enc.config
            flop += c.num_layers * 4.0 * args.tokens * args.tokens * c.num_heads * c.d_kv
        elif args.child == "latte":
            from diffusers import LatteTransformer3DModel

            m = LatteTransformer3DModel.from_pretrained(args.model, subfolder="transformer", torch_dtype=dt).eval()
            c = m.config
            x = torch.randn(2, c.in_channels, args.frames, args.size, args.size, generator=g).to(dt)
            text = torch.randn(2, args.tokens, c.caption_channels, generator=g).to(dt)
            t = torch.full((2,), 500.0)

            def run():
                return m(hidden_states=x, encoder_hidden_states=text, timestep=t, enable_temporal_attentions=True).sample

            flop = count_flops(m, run)
        else:
            raise SystemExit(f"unknown child {args.child}")
        vals = timed(run, args.warmup, args.repeat)
    report(vals, flop)


def torch_mm(args) -> None:
    import torch

    torch.set_num_threads(args.threads)
    dt = torch_dtype(args.dtype)
    n = args.size
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(n, n, generator=g).to(dt), torch.randn(n, n, generator=g).to(dt)
    c = torch.empty(n, n, dtype=dt)
    vals = []
    for r in range(args.warmup + args.repeat):
        t0 = time.perf_counter()
        torch.mm(a, b, out=c)
        if r >= args.warmup:
            vals.append(2.0 * n**3 / (time.perf_counter() - t0) * 1e-9)
    print(f"sgemm_gflops {statistics.median(vals):.2f}")


# ---------------------------------------------------------------------------
# Models (made once)


def ensure_vae(workdir: Path) -> Path:
    out = workdir / "sd-vae-random" / "vae"
    if (out / "config.json").exists():
        return out
    import torch
    from diffusers import AutoencoderKL

    print(f"creating {out} (random SD-sized AutoencoderKL) ...", flush=True)
    torch.manual_seed(0)
    vae = AutoencoderKL(in_channels=3, out_channels=3, down_block_types=["DownEncoderBlock2D"] * 4,
                        up_block_types=["UpDecoderBlock2D"] * 4, block_out_channels=[128, 256, 512, 512],
                        layers_per_block=2, latent_channels=4, norm_num_groups=32, sample_size=512)
    vae.save_pretrained(out, safe_serialization=True)
    return out


def ensure_t5(workdir: Path, py: str) -> Path:
    out = workdir / "t5xxl"
    run([py, str(REPO / "scripts/models/make_t5_xxl_random.py"), str(out), "--bf16-only"])
    return out / "t5xxl-bf16"


def ensure_latte(workdir: Path, py: str) -> Path:
    out = workdir / "latte1-random"
    if not (out / "transformer" / "config.json").exists():
        print(f"creating {out} (random Latte-1-sized transformer, caption_channels 4096) ...", flush=True)
        run([py, str(REPO / "scripts/models/make_random_latte.py"), str(out), "--layers", "28", "--heads", "16",
             "--head-dim", "72", "--sample-size", "32", "--video-length", "16", "--caption-channels", "4096"])
    return out


# ---------------------------------------------------------------------------
# Driver


def run(cmd, env=None) -> str:
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if res.returncode != 0:
        sys.exit(f"command failed ({res.returncode}): {' '.join(cmd)}\n{res.stdout}\n{res.stderr}")
    return res.stdout


class Row:
    def __init__(self, work, engine, dtype, flop=0.0):
        self.work, self.engine, self.dtype, self.flop = work, engine, dtype, flop
        self.times, self.rss = [], 0

    def add(self, kv):
        self.times += dit.floats(kv["forward_all"] if "forward_all" in kv else kv["decode_all"])
        self.rss = max(self.rss, int(kv["peak_rss_bytes"]))
        if "flop" in kv:
            self.flop = float(kv["flop"])

    def median(self):
        return statistics.median(self.times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parts", default=",".join(PARTS))
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/ditgen-bench"))
    ap.add_argument("--build", type=Path, default=REPO / "build")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--child", choices=["vae", "t5", "latte", "mm"], help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--dtype", default="float32", help=argparse.SUPPRESS)
    ap.add_argument("--size", type=int, default=512, help=argparse.SUPPRESS)
    ap.add_argument("--frames", type=int, default=16, help=argparse.SUPPRESS)
    ap.add_argument("--tokens", type=int, default=120, help=argparse.SUPPRESS)
    ap.add_argument("--warmup", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--repeat", type=int, default=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child == "mm":
        return torch_mm(args)
    if args.child:
        return child(args)
    parts = [p for p in args.parts.split(",") if p]
    for p in parts:
        if p not in PARTS:
            sys.exit(f"--parts: {p} is not one of {', '.join(PARTS)}")
    bench = args.build / "scripts/bench/cpp/bench_forward"
    vae_bench = args.build / "scripts/bench/cpp/bench_vae_decode"
    for b in (bench, vae_bench):
        if not b.exists():
            sys.exit(f"{b}: not found; build it: cmake -S . -B {args.build} -DDITGEN_BENCHMARKS=ON && cmake --build {args.build} --target {b.name}")
    args.workdir.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    me = [py, str(Path(__file__).resolve())]
    th = ["--threads", str(args.threads)]

    import torch

    print(f"torch {torch.__version__}; {os.cpu_count()} cores, {args.threads} threads, {args.rounds} rounds; "
          f"parts {', '.join(parts)}", flush=True)
    # GEMM peaks: always measured (every line's %peak needs them).
    peaks = {d: [] for d in DTYPES}
    tpeaks = {d: [] for d in DTYPES}
    models = {}
    if "dit" in parts:
        models["dit"] = dit.ensure_model(args.workdir)
    if "vae" in parts:
        models["vae"] = ensure_vae(args.workdir)
    if "t5" in parts:
        models["t5"] = ensure_t5(args.workdir, py)
    if "latte" in parts:
        models["latte"] = ensure_latte(args.workdir, py)

    rows: dict[tuple, Row] = {}

    def row(work, engine, dtype, flop=0.0):
        key = (work, engine, dtype)
        if key not in rows:
            rows[key] = Row(work, engine, dtype, flop)
        return rows[key]

    for r in range(args.rounds):
        for d in DTYPES:
            kv = dit.parse_kv(run([str(bench), "--sgemm", "4096", "--dtype", d, "--repeat", "3"] + th))
            peaks[d].append(float(kv["sgemm_gflops"]))
            kv = dit.parse_kv(run(me + ["--child", "mm", "--dtype", d, "--size", "4096", "--repeat", "3"] + th))
            tpeaks[d].append(float(kv["sgemm_gflops"]))
        print(f"round {r + 1}: GEMM peaks ditgen {[f'{max(v):.0f}' for v in peaks.values()]} "
              f"torch {[f'{max(v):.0f}' for v in tpeaks.values()]} (float32, bfloat16)", flush=True)
        if "dit" in parts:
            root = models["dit"]
            cfg = json.loads((root / "transformer" / "config.json").read_text())
            flop = sum(dit.flop_breakdown(cfg, 2).values())
            common = ["--repeat", "3", "--warmup", "1"] + th
            for d in DTYPES:
                out = run(me[:1] + [str(REPO / "scripts/bench/bench_dit_forward.py"), "--child", "torch-forward", "--model",
                                    str(root), "--batch", "2", "--dtype", d] + common)
                row("DiT-XL/2 forward 256², batch 2", "PyTorch", d, flop).add(dit.parse_kv(out))
                out = run([str(bench), "--model", str(root), "--batch", "2", "--dtype", d] + common)
                row("DiT-XL/2 forward 256², batch 2", "ditgen", d, flop).add(dit.parse_kv(out))
            print(f"round {r + 1}: dit done", flush=True)
        if "vae" in parts:
            for size in (256, 512):
                rep = ["--repeat", "3" if size == 256 else "1", "--warmup", "1" if size == 256 else "0"] + th
                for d in DTYPES:
                    work = f"SD VAE decode {size}²"
                    kv = dit.parse_kv(run(me + ["--child", "vae", "--model", str(models["vae"]), "--dtype", d,
                                                "--size", str(size)] + rep))
                    row(work, "diffusers", d).add(kv)
                    kv = dit.parse_kv(run([str(vae_bench), "--model", str(models["vae"]), "--size", str(size),
                                           "--dtype", d] + rep))
                    row(work, "ditgen", d, rows[(work, "diffusers", d)].flop).add(kv)
            print(f"round {r + 1}: vae done", flush=True)
        if "t5" in parts:
            work, d = "T5-XXL encode, 120 tokens", "bfloat16"
            rep = ["--repeat", "3", "--warmup", "1"] + th
            kv = dit.parse_kv(run(me + ["--child", "t5", "--model", str(models["t5"]), "--dtype", d] + rep))
            row(work, "transformers", d).add(kv)
            kv = dit.parse_kv(run([str(bench), "--text-encoder", str(models["t5"]), "--batch", "1", "--text-tokens",
                                   "120", "--dtype", d] + rep))
            row(work, "ditgen", d, rows[(work, "transformers", d)].flop).add(kv)
            # Packed weights, as a transformer's are (the pipeline keeps T5's
            # row-major: packing costs more than it saves on one encode).
            kv = dit.parse_kv(run([str(bench), "--text-encoder", str(models["t5"]), "--batch", "1", "--text-tokens",
                                   "120", "--pack-weights", "--dtype", d] + rep))
            row(work, "ditgen, packed weights", d, rows[(work, "transformers", d)].flop).add(kv)
            print(f"round {r + 1}: t5 done", flush=True)
        if "latte" in parts:
            work, d = "Latte-1 forward, 16 x 256², batch 2", "bfloat16"
            rep = ["--repeat", "1", "--warmup", "1"] + th
            kv = dit.parse_kv(run(me + ["--child", "latte", "--model", str(models["latte"]), "--dtype", d,
                                        "--size", "32", "--frames", "16"] + rep))
            row(work, "diffusers", d).add(kv)
            kv = dit.parse_kv(run([str(bench), "--model", str(models["latte"]), "--batch", "2", "--frames", "16",
                                   "--latent-size", "32", "--text-tokens", "120", "--dtype", d] + rep))
            row(work, "ditgen", d, rows[(work, "diffusers", d)].flop).add(kv)
            print(f"round {r + 1}: latte done", flush=True)

    peak = {d: max(v) for d, v in peaks.items()}
    print()
    for d in DTYPES:
        print(f"GEMM 4096³ peak {d}: ditgen's GEMM op {peak[d]:.1f} GFLOP/s, torch.mm {max(tpeaks[d]):.1f} GFLOP/s "
              f"(best run median)")
    print()
    print("| work | engine | dtype | median s | GFLOP | GFLOP/s | % of ditgen's GEMM peak | peak RSS | ditgen / reference |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (work, engine, d), rw in rows.items():
        med = rw.median()
        gf = rw.flop / med * 1e-9
        ratio = ""
        if engine.startswith("ditgen"):
            ref = next(v for (w, e, dd), v in rows.items() if w == work and dd == d and not e.startswith("ditgen"))
            ratio = f"{med / ref.median():.2f}×"
        print(f"| {work} | {engine} | {d} | {med:.3f} | {rw.flop / 1e9:.1f} | {gf:.1f} | {100 * gf / peak[d]:.0f}% | "
              f"{dit.gib(rw.rss)} | {ratio} |")


if __name__ == "__main__":
    main()

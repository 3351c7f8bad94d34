#!/usr/bin/env python3
"""Benchmark of the CLIP ViT-H/14 image encode of Wan 2.1 image-to-video (hidden_states[-2] of
transformers' CLIPVisionModel at 224 x 224, one image) on random weights of the real size: ditgen's
bench_clip_vision against transformers, float32 and bfloat16. A benchmark, not a test;
docs/clip-vision.md has the figures.

Model (built once under --workdir, never in the repository): transformers' own CLIPVisionModel of
the published image_encoder/config.json's sizes (hidden 1280, 32 layers, 16 heads, intermediate
5120, patch 14, image 224, hidden_act gelu; 631M parameters), its random init, written twice with
the published `vision_model.` names: f32/ (2.5 GB, float32) and bf16/ (1.3 GB, bfloat16). Each
side reads the folder of its compute dtype (transformers: from_pretrained(dtype=...); ditgen:
--dtype).

Runs, each its own process (peak RSS from os.wait4's rusage of that child alone), one image of
random normalised pixels, a warm-up encode then --repeat timed ones (median of the wall time, and
of the process's CPU time over the encode, all threads: steadier than the wall clock on a machine
shared with other jobs):

  transformers float32 / bfloat16   torch.set_num_threads(--threads), inference_mode,
                                    attn_implementation "sdpa" (transformers' default)
  ditgen float32 / bfloat16         bench_clip_vision --threads N, the GEMM weights as stored
                                    or converted (oneDNN reorders a bfloat16 one at each call)
  ditgen bfloat16 packed            the same with --pack: the weights packed once at load into
                                    oneDNN's blocked layout (a slower load, a faster encode)

Prints a table (encode median, load, their sum, peak RSS) and the ratios ditgen / transformers
of the same dtype, of the encode and of load + encode (one encode per load is what a Wan I2V
run does).

Usage (from the repository root, ditgen built with -DDITGEN_BENCHMARKS=ON):

    /root/venv-wan/bin/python scripts/bench/bench_clip_vision.py [--workdir /tmp/ditgen-bench/clip]
        [--build build] [--threads 2] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

VIT_H = dict(hidden_size=1280, intermediate_size=5120, projection_dim=1024, num_hidden_layers=32,
             num_attention_heads=16, num_channels=3, image_size=224, patch_size=14, hidden_act="gelu",
             layer_norm_eps=1e-5)

MAKE = r"""
import sys, torch
from pathlib import Path
from safetensors.torch import save_file
from transformers import CLIPVisionConfig, CLIPVisionModel
out = Path(sys.argv[1]); cfg = CLIPVisionConfig(**json.loads(sys.argv[2]))
torch.manual_seed(0)
model = CLIPVisionModel(cfg).eval()
for name, dtype in (("f32", torch.float32), ("bf16", torch.bfloat16)):
    d = out / name
    d.mkdir(parents=True, exist_ok=True)
    model.to(dtype).config.save_pretrained(str(d))
    sd = {"vision_model." + k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(sd, str(d / "model.safetensors"), metadata={"format": "pt"})
"""

TRANSFORMERS = r"""
import json, sys, time, torch
from transformers import CLIPVisionModel
folder, dtype, threads, repeat = sys.argv[1], getattr(torch, sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
torch.set_num_threads(threads)
t0 = time.perf_counter()
model = CLIPVisionModel.from_pretrained(folder, dtype=dtype).eval()
load = time.perf_counter() - t0
g = torch.Generator().manual_seed(0)
pixels = (torch.rand(1, 3, 224, 224, generator=g) * 4 - 2).to(dtype)
times, cpu = [], []
with torch.inference_mode():
    for r in range(repeat + 1):
        t, c = time.perf_counter(), time.process_time()
        out = model(pixel_values=pixels, output_hidden_states=True).hidden_states[-2]
        if r:
            times.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
print(json.dumps({"load_seconds": load, "encode_seconds": sorted(times)[len(times) // 2], "encode_all": times,
                  "encode_cpu_seconds": sorted(cpu)[len(cpu) // 2], "shape": list(out.shape)}))
"""


def timed_child(cmd: list[str], env: dict | None = None) -> tuple[str, int]:
    """Runs cmd as a child and returns (stdout, peak RSS in bytes of that child alone)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.dup2(w, 1)
        os.execvpe(cmd[0], cmd, env or os.environ)
    os.close(w)
    chunks = []
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    _, status, ru = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(cmd)} failed ({os.waitstatus_to_exitcode(status)})")
    return b"".join(chunks).decode(), ru.ru_maxrss * 1024


def make_model(workdir: Path) -> None:
    if (workdir / "bf16" / "model.safetensors").exists() and (workdir / "f32" / "model.safetensors").exists():
        return
    subprocess.run([sys.executable, "-c", "import json\n" + MAKE, str(workdir), json.dumps(VIT_H)], check=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", default="/tmp/ditgen-bench/clip")
    ap.add_argument("--build", default=str(REPO / "build"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    workdir = Path(args.workdir)
    bench = Path(args.build) / "scripts" / "bench" / "cpp" / "bench_clip_vision"
    if not bench.exists():
        sys.exit(f"{bench} not built (cmake -DDITGEN_BENCHMARKS=ON, target bench_clip_vision)")
    make_model(workdir)

    load_before = os.getloadavg()
    rows = {}
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    for dtype, folder in (("float32", "f32"), ("bfloat16", "bf16")):
        out, rss = timed_child([sys.executable, "-c", TRANSFORMERS, str(workdir / folder), dtype, str(args.threads),
                                str(args.repeat)])
        rows[f"transformers {dtype}"] = {**json.loads(out.strip().splitlines()[-1]), "peak_rss": rss}
        for pack in ([False, True] if dtype == "bfloat16" else [False]):
            out, rss = timed_child([str(bench), "--model", str(workdir / folder), "--dtype", dtype, "--threads",
                                    str(args.threads), "--repeat", str(args.repeat)] + (["--pack"] if pack else []),
                                   env)
            fig = dict(line.split(" ", 1) for line in out.strip().splitlines() if " " in line)
            rows[f"ditgen {dtype}" + (" packed" if pack else "")] = {
                "load_seconds": float(fig["load_seconds"]), "encode_seconds": float(fig["encode_seconds"]),
                "encode_all": fig["encode_all"], "encode_cpu_seconds": float(fig["encode_cpu_seconds"]),
                "peak_rss": rss}

    print(f"load average before {load_before}, after {os.getloadavg()}; threads {args.threads}, "
          f"repeat {args.repeat} (median)")
    print(f"{'run':<30}{'encode s':>10}{'CPU s':>8}{'load s':>9}{'sum s':>8}{'peak RSS GiB':>14}")
    for name, r in rows.items():
        print(f"{name:<30}{r['encode_seconds']:>10.3f}{r['encode_cpu_seconds']:>8.2f}{r['load_seconds']:>9.2f}"
              f"{r['encode_seconds'] + r['load_seconds']:>8.2f}{r['peak_rss'] / 2**30:>14.2f}")
    for name, r in rows.items():
        if not name.startswith("ditgen"):
            continue
        t = rows["transformers " + name.split()[1]]
        print(f"{name} / transformers: encode {r['encode_seconds'] / t['encode_seconds']:.2f}x (CPU time "
              f"{r['encode_cpu_seconds'] / t['encode_cpu_seconds']:.2f}x), load + encode "
              f"{(r['encode_seconds'] + r['load_seconds']) / (t['encode_seconds'] + t['load_seconds']):.2f}x, "
              f"peak RSS {r['peak_rss'] / t['peak_rss']:.2f}x")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()

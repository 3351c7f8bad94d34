#!/usr/bin/env python3
"""Benchmark of a step-distilled LoRA run (issue 46) on random weights of Wan 2.1 T2V-1.3B's real
size, end to end with `ditgen generate`: 4 steps at guidance 1 (what lightx2v-style LoRAs run)
against the full schedule, 50 steps at guidance 5, at 17 x 256 x 256; and what a rank-32 LoRA costs
at load (merged) and per step (at run time). A benchmark, not a test; docs/benchmarks.md has the
figures.

Runs (each its own `ditgen` process under /usr/bin/time -v: wall seconds and peak RSS):

  distilled        --steps 4, guidance 1, the rank-32 LoRA merged at load (lora_apply left out)
  distilled_rt     the same, the LoRA applied at run time (lora_apply "runtime")
  plain_4          --steps 4, guidance 1, no LoRA (the same work without the LoRA)
  full             --steps N (--full-steps, default 50), guidance 5, no LoRA; with --full-steps
                   below 50 the 50-step time is the measured time per step times 50 plus the rest
                   (text encoder, load, decode), taken from plain_1 below
  plain_1, lora_1  --steps 1, guidance 1, without and with the merged LoRA: their difference is the
                   LoRA's cost at load (reading the file, merging 300 tensors), within the noise of a
                   busy machine; so also
  load_plain, load_lora, load_runtime
                   --steps 1, --frames 1, under DITGEN_PROFILE=1: the profile's load_transformer
                   (the transformer's load, merging included), lora_merge and lora_runtime rows

Model (built once under --workdir, never in the repository): transformer/ and vae/ linked from
--model (the random Wan 1.3B folder of bench_video_models.py), the tiny fixture's UniPC scheduler
(flow_shift 3) and tokenizer, and a ONE-layer random UMT5 text encoder of Wan's width (d_model
4096) standing in for UMT5-XXL, whose encode is the same in every run and is not what is compared.
LoRA: rank 32, alpha 32, bfloat16 (as published LoRAs are), diffusers naming, on every attention
projection (attn1, attn2: to_q, to_k, to_v, to_out.0) and both feed-forward layers of all 30
blocks: 300 pairs, 44 million numbers (87 MB in bfloat16).

Usage (from the repository root; the Wan-era Python environment for torch / transformers):

    /root/venv-wan/bin/python scripts/bench/bench_lora.py [--model /tmp/ditgen-bench/Wan2.1-T2V-1.3B-random]
        [--workdir /tmp/ditgen-bench/lora] [--build build] [--threads 2] [--full-steps 50]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "tests" / "fixtures" / "wan_tiny"
RANK = 32
MODULES = [f"attn{a}.{p}" for a in (1, 2) for p in ("to_q", "to_k", "to_v", "to_out.0")] + ["ffn.net.0.proj",
                                                                                            "ffn.net.2"]


def make_model(model: Path, root: Path) -> Path:
    out = root / "wan13b"
    if (out / "text_encoder" / "config.json").exists():
        return out
    import torch
    from transformers import UMT5Config, UMT5EncoderModel

    out.mkdir(parents=True, exist_ok=True)
    for part in ("transformer", "vae"):
        link = out / part
        if not link.exists():
            link.symlink_to(model / part)
    for part in ("scheduler", "tokenizer"):
        shutil.copytree(TINY / part, out / part, dirs_exist_ok=True)
    index = json.loads((model / "model_index.json").read_text())
    (out / "model_index.json").write_text(json.dumps(index, indent=2))
    tiny = json.loads((TINY / "text_encoder" / "config.json").read_text())
    cfg = UMT5Config(**{**tiny, "d_model": 4096, "d_kv": 64, "num_heads": 64, "d_ff": 256, "num_layers": 1,
                        "num_decoder_layers": 1})
    torch.manual_seed(0)
    UMT5EncoderModel(cfg).save_pretrained(str(out / "text_encoder"))
    return out


def make_lora(model: Path, root: Path) -> Path:
    path = root / f"rank{RANK}.safetensors"
    if path.exists():
        return path
    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file

    tensors = {}
    gen = torch.Generator().manual_seed(0)
    with safe_open(str(model / "transformer" / "diffusion_pytorch_model.safetensors"), "pt") as f:
        blocks = sorted({int(m.group(1)) for k in f.keys() if (m := re.match(r"blocks\.(\d+)\.", k))})
        for b in blocks:
            for m in MODULES:
                out_f, in_f = f.get_slice(f"blocks.{b}.{m}.weight").get_shape()
                a = torch.randn(RANK, in_f, generator=gen) / in_f ** 0.5
                bb = torch.randn(out_f, RANK, generator=gen) * 0.01
                tensors[f"transformer.blocks.{b}.{m}.lora_A.weight"] = a.to(torch.bfloat16)
                tensors[f"transformer.blocks.{b}.{m}.lora_B.weight"] = bb.to(torch.bfloat16)
    save_file(tensors, str(path))
    return path


def timed(cmd: list[str], env: dict) -> tuple[float, float, str]:
    """(wall seconds, peak RSS GiB, stderr) of cmd under /usr/bin/time -v, with `env` added."""
    start = time.monotonic()
    r = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True, env={**os.environ, **env})
    wall = time.monotonic() - start
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-3000:]}")
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr).group(1)) / 2 ** 20
    return wall, rss, r.stderr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=Path("/tmp/ditgen-bench/Wan2.1-T2V-1.3B-random"))
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/ditgen-bench/lora"))
    ap.add_argument("--build", type=Path, default=REPO / "build")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--full-steps", type=int, default=50)
    ap.add_argument("--runs", default="plain_1,lora_1,distilled,distilled_rt,plain_4,full,load_plain,load_lora,load_runtime")
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    model = make_model(args.model.resolve(), args.workdir)
    lora = make_lora(args.model.resolve(), args.workdir)
    config = {
        "model": {"path": str(model), "dtype": "bfloat16"},
        "generate": {"prompts": ["a red cat walking on the moon at night"], "frames": 17, "height": 256,
                     "width": 256, "seed": 0, "max_sequence_length": 512},
        "output": {"format": "mp4"},
    }
    cfg_path = args.workdir / "run.json"
    cfg_path.write_text(json.dumps(config, indent=2))
    lora_args = ["--lora", str(lora)]
    runs = {
        "plain_1": ["--steps", "1", "--guidance", "1"],
        "lora_1": ["--steps", "1", "--guidance", "1", *lora_args],
        "distilled": ["--steps", "4", "--guidance", "1", *lora_args],
        "distilled_rt": ["--steps", "4", "--guidance", "1", *lora_args, "--set", "lora_apply=runtime"],
        "plain_4": ["--steps", "4", "--guidance", "1"],
        "full": ["--steps", str(args.full_steps), "--guidance", "5"],
        "load_plain": ["--steps", "1", "--guidance", "1", "--frames", "1"],
        "load_lora": ["--steps", "1", "--guidance", "1", "--frames", "1", *lora_args],
        "load_runtime": ["--steps", "1", "--guidance", "1", "--frames", "1", *lora_args, "--set", "lora_apply=runtime"],
    }
    results = {}
    for name in args.runs.split(","):
        cmd = [str(args.build / "ditgen"), "--device", "cpu", "--threads", str(args.threads), "--config",
               str(cfg_path), "--output", str(args.workdir / f"{name}.mp4"), *runs[name]]
        profiled = name.startswith("load_")
        wall, rss, err = timed(cmd, {"DITGEN_PROFILE": "1"} if profiled else {})
        steps = re.findall(r"step (\d+)/(\d+) ([\d.]+) s/it", err)
        results[name] = {"wall_s": round(wall, 2), "peak_rss_gib": round(rss, 2),
                         "last_s_per_it": float(steps[-1][2]) if steps else None}
        for row in ("load_transformer", "lora_merge", "lora_runtime"):
            if m := re.search(rf"^\s*{row}\s+([\d.]+) s", err, re.M):
                results[name][row + "_s"] = float(m.group(1))
        print(name, json.dumps(results[name]), flush=True)
    if "full" in results and "plain_1" in results and args.full_steps != 50:
        # per step of guidance 5 (two forwards): (full - plain_1's fixed part) / steps
        fixed = results["plain_1"]["wall_s"] - results["plain_1"]["last_s_per_it"]
        per_step = (results["full"]["wall_s"] - fixed) / args.full_steps
        results["full_50_scaled"] = {"wall_s": round(fixed + 50 * per_step, 1), "per_step_s": round(per_step, 2)}
        print("full_50_scaled", json.dumps(results["full_50_scaled"]))
    (args.workdir / "results.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

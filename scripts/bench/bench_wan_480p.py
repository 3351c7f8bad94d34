#!/usr/bin/env python3
"""A Wan 2.1 T2V-1.3B run at 33 x 480 x 832 measured end to end (`ditgen generate`), on random
weights of the real sizes with a full-size UMT5-XXL text encoder in bfloat16: wall time per stage
and peak RSS per stage, with the VAE decode untiled and tiled. A benchmark, not a test;
docs/benchmarks.md has the figures.

Model (written once under --workdir, never in the repository):
  transformer/, vae/   linked from --model (bench_video_models.py's random Wan 1.3B folder)
  text_encoder/        UMT5-XXL's published config (configs/models/Wan2.1-T2V-1.3B-Diffusers), random
                       bfloat16 weights (5.7 billion numbers, 11.4 GB) written tensor by tensor in
                       2 GB shards with model.safetensors.index.json, as the published folder is
  tokenizer/, scheduler/  the tiny Wan fixture's (UniPC, flow_shift 3): the tokenizer's ids fit the
                       real vocabulary, so the encoder does the real encoder's work (512 tokens)

Runs (each its own process under /usr/bin/time -v, DITGEN_PROFILE=1, 2 steps, guidance 5, the
shipped config's negative prompt, model.dtype bfloat16): vae.tiling "off" and "on" (diffusers'
default tiles, 256 every 192). While a run goes, its resident memory is read from /proc every
0.1 s; each stderr line is stamped as it arrives, so a stage's peak is the highest reading between
the lines that open and close it:
  text      start -> the text encoder's progress line (loading UMT5-XXL, encoding both prompts)
  denoise   -> the last step's line (the transformer's load and both steps)
  decode    -> "wrote" (the VAE's load and decode, and the MP4's encode)
Stage times are the profile's text_encoder, load_transformer, vae_decode and the step lines'.

Usage (from the repository root; the Wan-era Python environment for torch / safetensors):

    /root/venv-wan/bin/python scripts/bench/bench_wan_480p.py [--model /tmp/ditgen-bench/Wan2.1-T2V-1.3B-random]
        [--workdir /tmp/ditgen-bench/wan480p] [--build build] [--frames 33] [--steps 2] [--runs off,on]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "tests" / "fixtures" / "wan_tiny"
PUBLISHED = REPO / "configs" / "models" / "Wan2.1-T2V-1.3B-Diffusers"
SHARD_BYTES = 2 << 30


def make_text_encoder(out: Path) -> None:
    """UMT5-XXL's encoder with random bfloat16 weights, shard by shard (never all in memory)."""
    if (out / ".complete").exists():
        return
    import torch
    from safetensors.torch import save_file
    from transformers import UMT5Config, UMT5EncoderModel

    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    cfg_json = json.loads((PUBLISHED / "text_encoder" / "config.json").read_text())
    cfg = UMT5Config(**{k: v for k, v in cfg_json.items() if not k.startswith("_")})
    with torch.device("meta"):
        shapes = {k: tuple(v.shape) for k, v in UMT5EncoderModel(cfg).state_dict().items()}
    shapes.pop("encoder.embed_tokens.weight", None)  # the same tensor as shared.weight
    gen = torch.Generator().manual_seed(0)
    weight_map, shard, shard_bytes, index = {}, {}, 0, 0

    def flush() -> None:
        nonlocal shard, shard_bytes, index
        if not shard:
            return
        index += 1
        name = f"model-{index:05d}.safetensors"
        save_file(shard, str(out / name), metadata={"format": "pt"})
        for k in shard:
            weight_map[k] = name
        print(f"  {name}: {len(shard)} tensors", file=sys.stderr, flush=True)
        shard, shard_bytes = {}, 0

    for name, shape in shapes.items():
        if name.endswith("layer_norm.weight"):
            t = torch.ones(shape, dtype=torch.bfloat16)
        else:  # embeddings N(0, 1) as T5 initialises them; matrices small enough that 24 layers stay finite
            std = 1.0 if name == "shared.weight" else 0.02
            t = (torch.randn(shape, generator=gen) * std).to(torch.bfloat16)
        shard[name] = t
        shard_bytes += t.numel() * 2
        if shard_bytes >= SHARD_BYTES:
            flush()
    flush()
    names = [f"model-{i:05d}.safetensors" for i in range(1, index + 1)]
    for old, new in zip(names, [f"model-{i:05d}-of-{index:05d}.safetensors" for i in range(1, index + 1)]):
        (out / old).rename(out / new)
    weight_map = {k: v.replace(".safetensors", f"-of-{index:05d}.safetensors") for k, v in weight_map.items()}
    total = sum(2 * _numel(s) for s in shapes.values())
    (out / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=1))
    cfg_json["torch_dtype"] = "bfloat16"
    (out / "config.json").write_text(json.dumps(cfg_json, indent=2))
    (out / ".complete").write_text("")


def _numel(shape: tuple) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def make_model(model: Path, root: Path) -> Path:
    out = root / "model"
    out.mkdir(parents=True, exist_ok=True)
    for part in ("transformer", "vae"):
        link = out / part
        if not link.exists():
            link.symlink_to(model / part)
    for part in ("scheduler", "tokenizer"):
        shutil.copytree(TINY / part, out / part, dirs_exist_ok=True)
    shutil.copy(TINY / "model_index.json", out / "model_index.json")
    make_text_encoder(out / "text_encoder")
    return out


class RssSampler(threading.Thread):
    """Reads a process's VmRSS every `period` seconds into (time, bytes) pairs."""

    def __init__(self, pid: int, period: float = 0.1):
        super().__init__(daemon=True)
        self.pid, self.period, self.samples, self.done = pid, period, [], False

    def run(self) -> None:
        path = f"/proc/{self.pid}/status"
        while not self.done:
            try:
                with open(path) as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            self.samples.append((time.monotonic(), int(line.split()[1]) * 1024))
                            break
            except OSError:
                return
            time.sleep(self.period)


def run(ditgen: Path, config: Path, env: dict) -> dict:
    """One `ditgen --config` under /usr/bin/time -v: wall, peak RSS, stderr lines with times, RSS samples."""
    start = time.monotonic()
    p = subprocess.Popen(["/usr/bin/time", "-v", str(ditgen), "--config", str(config)], stderr=subprocess.PIPE,
                         stdout=subprocess.DEVNULL, text=True, env={**os.environ, **env})
    # /usr/bin/time's child is ditgen: sample it, not time itself
    child = None
    for _ in range(100):
        try:
            child = int(Path(f"/proc/{p.pid}/task/{p.pid}/children").read_text().split()[0])
            break
        except (OSError, IndexError, ValueError):
            time.sleep(0.02)
    sampler = RssSampler(child if child else p.pid)
    sampler.start()
    lines = []
    for line in p.stderr:
        lines.append((time.monotonic(), line.rstrip("\n")))
    p.wait()
    sampler.done = True
    sampler.join()
    wall = time.monotonic() - start
    text = "\n".join(l for _, l in lines)
    if p.returncode != 0:
        sys.exit(f"ditgen failed ({p.returncode}) on {config}:\n{text[-3000:]}")
    peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text).group(1)) * 1024
    return {"start": start, "wall": wall, "peak": peak, "lines": lines, "samples": sampler.samples, "text": text}


def profile_seconds(text: str, name: str) -> float:
    m = re.search(rf"^\s+{re.escape(name)}\s+([0-9.]+) s", text, re.M)
    return float(m.group(1)) if m else 0.0


def stages(r: dict) -> list[tuple[str, float, float]]:
    """(stage, seconds, peak RSS bytes) per stage, cut at the stderr lines."""
    lines, samples = r["lines"], r["samples"]
    text_end = next(t for t, l in lines if l.startswith("text encoder:"))
    steps = [(t, l) for t, l in lines if re.match(r"outputs \d+/\d+: step \d+/\d+", l)]
    denoise_end = steps[-1][0]
    decode_end = next(t for t, l in lines if l.startswith("ditgen: wrote"))
    step_s = sum(float(m.group(1)) for _, l in steps if (m := re.search(r"([0-9.]+) s/it", l)))

    def peak(a: float, b: float) -> int:
        return max((b_ for t, b_ in samples if a <= t <= b), default=0)

    return [("text encoder (load + encode)", profile_seconds(r["text"], "text_encoder"), peak(r["start"], text_end)),
            ("transformer load", profile_seconds(r["text"], "load_transformer"), 0),
            ("denoising (2 steps, CFG)", step_s, peak(text_end, denoise_end)),
            ("VAE decode", profile_seconds(r["text"], "vae_decode"), peak(denoise_end, decode_end)),
            ("whole run", r["wall"], r["peak"])]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=Path("/tmp/ditgen-bench/Wan2.1-T2V-1.3B-random"))
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/ditgen-bench/wan480p"))
    ap.add_argument("--build", type=Path, default=REPO / "build")
    ap.add_argument("--frames", type=int, default=33)
    ap.add_argument("--height", type=int, default=480)
    ap.add_argument("--width", type=int, default=832)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--runs", default="off,on", help="vae.tiling values, one run each")
    args = ap.parse_args()
    if REPO in args.workdir.resolve().parents:
        sys.exit("--workdir must lie outside the repository (the weights are gigabytes)")
    model = make_model(args.model, args.workdir)
    shipped = json.loads((REPO / "configs" / "wan2.1-t2v-1.3b.json").read_text())
    results = {}
    for tiling in args.runs.split(","):
        cfg = {"model": {"path": str(model), "dtype": "bfloat16"},
               "generate": {**shipped["generate"], "frames": args.frames, "height": args.height,
                            "width": args.width, "steps": args.steps},
               "vae": {"tiling": tiling},
               "output": {"path": str(args.workdir / f"out-tiling-{tiling}.mp4"), "fps": 16}}
        config = args.workdir / f"run-tiling-{tiling}.json"
        config.write_text(json.dumps(cfg, indent=1))
        print(f"running vae.tiling {tiling} ...", file=sys.stderr, flush=True)
        results[tiling] = run(args.build / "ditgen", config, {"DITGEN_PROFILE": "1"})
        for t, l in results[tiling]["lines"]:
            if l.startswith("ditgen:") and "time per op" not in l:
                print(f"  {l}", file=sys.stderr)
        # Each run's stages kept as it ends (a run takes an hour on a busy machine)
        saved = args.workdir / f"stages-tiling-{tiling}.json"
        saved.write_text(json.dumps({"stages": stages(results[tiling]), "load_average": os.getloadavg(),
                                     "stderr": results[tiling]["text"]}, indent=1))
        print(f"  stages: {saved}", file=sys.stderr)
    cpu = next((l.split(":", 1)[1].strip() for l in subprocess.run(["lscpu"], capture_output=True, text=True)
                .stdout.splitlines() if l.startswith("Model name")), "?")
    print(f"\nWan 2.1 T2V-1.3B (random weights), {args.frames} x {args.height} x {args.width}, {args.steps} steps, "
          f"guidance {shipped['generate']['guidance_scale']}, UMT5-XXL bfloat16; {cpu}, {os.cpu_count()} CPUs; "
          f"load average at the end {os.getloadavg()[0]:.1f}\n")
    print("| stage | " + " | ".join(f"tiling {k}: s | tiling {k}: peak RSS GiB" for k in results) + " |")
    print("|---|" + "---|---|" * len(results))
    per = {k: stages(r) for k, r in results.items()}
    for i, (name, _, _) in enumerate(next(iter(per.values()))):
        cells = []
        for k in results:
            _, s, b = per[k][i]
            cells += [f"{s:.1f}", f"{b / 2**30:.2f}" if b else "-"]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Benchmark of ditgen's quantized weights (issue 44, "weights as people
download them"), on random weights of the real sizes: time, peak RSS and
the relative L2 of each variant's output to the bfloat16 forward's.  A
benchmark, not a test; docs/quantized-benchmark.md has the figures.

Parts (--parts, default all four):

  wan      Wan 2.1 T2V-1.3B, one transformer forward (CFG batch 2) at 17 x
           256 x 256 (latents (2, 16, 5, 32, 32), 512 text rows): diffusers
           bf16, ditgen bf16 and float32, the model converted by `ditgen
           convert` to Q8_0 and Q4_K GGUF files run in bf16 compute
           (--transformer-file), and ditgen int8 (model.quantize, --quantize
           int8) [goals: int8 <= 0.45x diffusers' bf16 time; Q8_0 relL2 <=
           1e-2; Q8_0 peak RSS <= 0.6x ditgen bf16's].  diffusers is given
           ditgen bf16's inputs (bench_forward --save-output), so its output
           is compared too.
  dit      DiT-XL/2 256, one forward of batch 2 (a CFG step): PyTorch
           (diffusers' DiTTransformer2DModel) bf16, ditgen bf16 and float32,
           ditgen int8 in bf16 compute [goal: int8 <= 0.5x PyTorch bf16].
  wan14b   Wan2.1-T2V-14B as a Q8_0 GGUF (make_random_gguf: random values,
           written tensor by tensor, never the float model; 15.9 GB, deleted
           afterwards unless --keep-14b), one forward at 17 x 256 x 256 in
           bf16 compute: seconds, peak RSS, and the peaks of its anonymous
           and file-backed pages sampled from /proc (the kernel may drop
           mapped weight pages under memory pressure, so the file's size
           plus the anonymous peak bounds what the forward needs) [goal:
           fits in 24 GiB with the text encoder freed].
  quality  the shipped defaults run by `ditgen` as configured and with
           --set model.quantize=int8, scored by the training scripts'
           classifiers (scripts/train: shapes_dataset.classify, the colour
           and shape of each of configs/shapes-image.json's 30 images;
           video_quality, colour / shape / motion of configs/default.json's
           model on all 180 captions) [goal: int8's scores within 1 of 30
           of the float run's].

Usage (from the repository root; the Wan-era Python environment,
scripts/fixtures/requirements-wan.txt, for torch, diffusers 0.42, gguf,
safetensors and Pillow):

    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DDITGEN_BENCHMARKS=ON
    cmake --build build --target ditgen bench_forward make_random_gguf -j
    /root/venv-wan/bin/python scripts/bench/bench_quantized.py \\
        [--parts wan,dit,wan14b,quality] [--workdir /tmp/ditgen-bench] [--build build] \\
        [--threads 2] [--repeat 3] [--warmup 1] [--rounds 2] [--keep-14b] [--profile] [--small]

Models are written once under --workdir (never inside the repository):
the Wan 1.3B folder of bench_video_models.py (5.7 GB) and its Q8_0 / Q4_K
files (1.6 / 1.0 GB), bench_dit_forward.py's DiT-XL/2 (2.7 GB).  Every
measurement is its own subprocess (each peak RSS its own); within a
round the variants run one after another, so over the rounds they see
the same load; the figure is the median of all timed passes.  --profile
adds one bench_forward --profile run per ditgen variant of the wan and
dit parts after the rounds (where the time goes; not in the medians).
--small checks the script in minutes on tiny models (bench_video_models'
--small Wan; the other parts skipped); its figures mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "scripts" / "train"))
import bench_dit_forward as dit  # noqa: E402  (the DiT-XL/2 model, PyTorch's child, output parsing)
import bench_video_models as video  # noqa: E402  (the Wan model, diffusers' child, bench_forward runs)

PARTS = ("wan", "dit", "wan14b", "quality")
WAN14B_CONFIG = REPO / "configs" / "models" / "Wan2.1-T2V-14B-Diffusers" / "transformer"


@dataclass
class Variant:
    label: str
    engine: str                  # "ditgen", or the reference ("diffusers", "PyTorch")
    dtype: str
    file_type: str | None = None  # a converted GGUF file of this type (--transformer-file)
    quantize: str | None = None   # --quantize
    times: list = field(default_factory=list)
    rss: int = 0
    output: Path | None = None   # its first forward's output (round 1)
    failed: str | None = None

    def median(self) -> float:
        return statistics.median(self.times)

    def add(self, r: dict) -> None:
        self.times += r["seconds"]
        self.rss = max(self.rss, r["peak_rss_bytes"])
        print(f"  {self.label}: {statistics.median(r['seconds']):.3f} s, peak RSS {r['peak_rss_bytes'] / 2**30:.2f} GiB",
              flush=True)


def ditgen_extra(v: Variant, files: dict, save: Path | None) -> list[str]:
    """bench_forward's options for a ditgen variant."""
    extra = ["--transformer-file", str(files[v.file_type])] if v.file_type else []
    extra += ["--quantize", v.quantize] if v.quantize else []
    return extra + (["--save-output", str(save)] if save else [])


def rel_l2(a: Path, b: Path) -> float:
    import numpy as np
    from safetensors.numpy import load_file

    x, y = load_file(str(a))["output"].astype(np.float64), load_file(str(b))["output"].astype(np.float64)
    if x.shape != y.shape:
        raise SystemExit(f"{a} and {b}: outputs of shapes {x.shape} and {y.shape}")
    return float(np.linalg.norm(x - y) / np.linalg.norm(y))


def print_table(title: str, variants: list[Variant], reference: str) -> None:
    """Median seconds, peak RSS, ratios to the reference's bf16 and to
    ditgen bf16's, relative L2 to ditgen bf16's, float32's and the
    reference's outputs."""
    def find(engine, dtype):
        return next((v for v in variants if v.engine == engine and v.dtype == dtype and not v.file_type
                     and not v.quantize and v.times), None)

    ref, bf16, f32 = find(reference, "bfloat16"), find("ditgen", "bfloat16"), find("ditgen", "float32")
    print(f"\n{title}\n")
    print(f"| variant | median s | peak RSS GiB | / {reference} bf16 time | / ditgen bf16 time | peak RSS / ditgen bf16 "
          f"| relL2 to ditgen bf16 | relL2 to ditgen f32 | relL2 to {reference} bf16 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for v in variants:
        if not v.times:
            print(f"| {v.label} | not run: {v.failed or '?'} | | | | | | | |")
            continue
        t = v.median()

        def ratio(o):
            return f"{t / o.median():.2f}x" if o else "-"

        def l2(o):
            return f"{rel_l2(v.output, o.output):.2e}" if o and o is not v and v.output and o.output else "-"

        rss = f"{v.rss / bf16.rss:.2f}x" if bf16 else "-"
        print(f"| {v.label} | {t:.3f} | {v.rss / 2**30:.2f} | {ratio(ref)} | {ratio(bf16)} | {rss} | {l2(bf16)} | "
              f"{l2(f32)} | {l2(ref)} |")


def profile_of(cmd: list[str]) -> str:
    """bench_forward's per-op table (one more run, with --profile)."""
    return dit.profile_block(dit.run(cmd + ["--profile"]))


# ---------------------------------------------------------------------------
# wan: Wan 2.1 T2V-1.3B


def convert(args, model: Path, file_type: str) -> Path:
    """`ditgen convert` of the model's transformer to a GGUF file (once)."""
    out = args.workdir / f"{model.name}-{file_type.upper()}.gguf"
    if not out.exists():
        print(f"converting {model} to {out} ...", flush=True)
        dit.run([str(args.build / "ditgen"), "convert", "--input", str(model), "--type", file_type, "--output",
                 str(out), "--threads", str(args.threads), "--quiet"])
    return out


def bench_wan(args) -> None:
    spec = video.MODELS["wan2.1-1.3b"]
    model = video.ensure_model("wan2.1-1.3b", args.workdir, args.small)
    files = {t: convert(args, model, t) for t in ("q8_0", "q4_k")}
    vargs = argparse.Namespace(threads=args.threads, repeat=args.repeat, warmup=args.warmup, frames=spec.frames,
                               size=spec.size, bench_dir=args.build / "scripts" / "bench" / "cpp")
    variants = [Variant("ditgen bf16", "ditgen", "bfloat16"),  # first: its saved inputs feed diffusers
                Variant("diffusers bf16", "diffusers", "bfloat16"),
                Variant("ditgen float32", "ditgen", "float32"),
                Variant("ditgen Q8_0 (bf16 compute)", "ditgen", "bfloat16", file_type="q8_0"),
                Variant("ditgen Q4_K (bf16 compute)", "ditgen", "bfloat16", file_type="q4_k"),
                Variant("ditgen int8 (bf16 compute)", "ditgen", "bfloat16", quantize="int8")]
    outputs = args.workdir / "quantized-outputs"
    outputs.mkdir(exist_ok=True)
    inputs = None
    for r in range(args.rounds):
        print(f"wan round {r + 1}/{args.rounds}", flush=True)
        for i, v in enumerate(variants):
            save = outputs / f"wan-{i}.safetensors" if r == 0 else None
            try:
                if v.engine == "diffusers":
                    res = video.run_torch(vargs, spec, model, "transformer", v.dtype, inputs=inputs, save=save)
                else:
                    res = video.run_ditgen(vargs, spec, model, "transformer", v.dtype, ditgen_extra(v, files, save))
            except video.Failed as e:
                v.failed = str(e)
                print(f"  {v.label}: did not run: {e}", flush=True)
                continue
            v.add(res)
            if save:
                v.output = save
                inputs = inputs or save
    lf, n = spec.latent_frames(spec.frames), spec.size // 8
    print_table(f"{spec.label}{' (SMALL: script check only)' if args.small else ''}, random weights: transformer "
                f"forward CFG batch 2 at {spec.frames} x {spec.size} x {spec.size} ({lf} x {n} x {n} latents, "
                f"{spec.text_tokens} text rows); {args.threads} threads, median of {args.rounds} x {args.repeat} "
                f"passes", variants, "diffusers")
    if args.profile:
        base = [str(vargs.bench_dir / "bench_forward"), "--model", str(model), "--batch", "2", "--frames", str(lf),
                "--latent-size", str(n), "--text-tokens", str(spec.text_tokens), "--threads", str(args.threads),
                "--repeat", "1", "--warmup", "1"]
        for v in variants:
            if v.engine == "ditgen":
                print(f"\nprofile, {v.label} (one forward):\n"
                      + profile_of(base + ["--dtype", v.dtype] + ditgen_extra(v, files, None)), flush=True)


# ---------------------------------------------------------------------------
# dit: DiT-XL/2


def bench_dit(args) -> None:
    root = dit.ensure_model(args.workdir)
    bench = str(args.build / "scripts" / "bench" / "cpp" / "bench_forward")
    common = ["--batch", "2", "--threads", str(args.threads), "--repeat", str(args.repeat), "--warmup",
              str(args.warmup)]
    variants = [Variant("PyTorch bf16", "PyTorch", "bfloat16"),
                Variant("ditgen bf16", "ditgen", "bfloat16"),
                Variant("ditgen float32", "ditgen", "float32"),
                Variant("ditgen int8 (bf16 compute)", "ditgen", "bfloat16", quantize="int8")]
    outputs = args.workdir / "quantized-outputs"
    outputs.mkdir(exist_ok=True)
    for r in range(args.rounds):
        print(f"dit round {r + 1}/{args.rounds}", flush=True)
        for i, v in enumerate(variants):
            if v.engine == "PyTorch":
                out = dit.run([sys.executable, str(HERE / "bench_dit_forward.py"), "--child", "torch-forward",
                               "--model", str(root), "--dtype", v.dtype] + common)
            else:
                save = outputs / f"dit-{i}.safetensors" if r == 0 else None
                out = dit.run([bench, "--model", str(root), "--dtype", v.dtype] + common
                              + ditgen_extra(v, {}, save))
                v.output = v.output or save
            kv = dit.parse_kv(out)
            v.add({"seconds": dit.floats(kv["forward_all"]), "peak_rss_bytes": int(kv["peak_rss_bytes"])})
    print_table(f"DiT-XL/2 256, random weights: one forward of batch 2 (a CFG step); {args.threads} threads, median "
                f"of {args.rounds} x {args.repeat} passes", variants, "PyTorch")
    if args.profile:
        for v in variants:
            if v.engine == "ditgen":
                print(f"\nprofile, {v.label} (one forward):\n"
                      + profile_of([bench, "--model", str(root), "--dtype", v.dtype, "--batch", "2", "--threads",
                                    str(args.threads), "--repeat", "1", "--warmup", "1"] + ditgen_extra(v, {}, None)),
                      flush=True)


# ---------------------------------------------------------------------------
# wan14b: Wan2.1-T2V-14B in Q8_0


# The model's tensors (names, shapes) from diffusers' class built on the
# meta device: no weight is allocated.
TENSORS_CHILD = r"""
import json, sys
import torch, diffusers
cfg = {k: v for k, v in json.load(open(sys.argv[1])).items() if not k.startswith("_")}
with torch.device("meta"):
    m = diffusers.WanTransformer3DModel(**cfg)
json.dump([[k, list(v.shape)] for k, v in m.state_dict().items()], open(sys.argv[2], "w"))
"""


def kib_field(path: str, key: str) -> int:
    """A "Key:  N kB" line of a /proc file, in bytes (0 when absent)."""
    try:
        with open(path) as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def run_sampled(cmd: list[str]) -> tuple[str, dict]:
    """Runs cmd, sampling its resident memory every 0.2 s: the peaks of its
    anonymous pages (RssAnon: activations, scratch, converted weights) and
    of its mapped file pages (RssFile: the weights read in place, which the
    kernel may drop and read again under memory pressure, so ru_maxrss
    alone can understate what a forward touches)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peaks = {"RssAnon": 0, "RssFile": 0}
    status = f"/proc/{proc.pid}/status"
    while proc.poll() is None:
        for key in peaks:
            peaks[key] = max(peaks[key], kib_field(status, key))
        time.sleep(0.2)
    out, err = proc.communicate()
    if proc.returncode != 0:
        sys.exit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{out}\n{err}")
    return out, peaks


def bench_wan14b(args) -> None:
    out = args.workdir / "Wan2.1-T2V-14B-random-Q8_0.gguf"
    if not out.exists():
        free = shutil.disk_usage(args.workdir).free
        if free < 18 * 10**9:
            sys.exit(f"{args.workdir}: {free / 1e9:.1f} GB free; the 14B Q8_0 file needs 15.3 GB (and a margin)")
        tensors = args.workdir / "Wan2.1-T2V-14B-tensors.json"
        dit.run([sys.executable, "-c", TENSORS_CHILD, str(WAN14B_CONFIG / "config.json"), str(tensors)])
        t0 = time.perf_counter()
        subprocess.run([str(args.build / "scripts" / "bench" / "cpp" / "make_random_gguf"), "--config",
                        str(WAN14B_CONFIG / "config.json"), "--tensors", str(tensors), "--type", "q8_0", "--output",
                        str(out)], check=True)
        print(f"wrote {out}: {out.stat().st_size / 1e9:.2f} GB in {time.perf_counter() - t0:.0f} s", flush=True)
    spec = video.MODELS["wan2.1-1.3b"]  # the same latent and text sizes
    lf, n = spec.latent_frames(spec.frames), spec.size // 8
    size = out.stat().st_size
    print(f"MemAvailable before the forward: {kib_field('/proc/meminfo', 'MemAvailable') / 2**30:.2f} GiB", flush=True)
    try:
        stdout, peaks = run_sampled([str(args.build / "scripts" / "bench" / "cpp" / "bench_forward"), "--model",
                                     str(WAN14B_CONFIG), "--transformer-file", str(out), "--dtype", "bfloat16",
                                     "--batch", "2", "--frames", str(lf), "--latent-size", str(n), "--text-tokens",
                                     str(spec.text_tokens), "--threads", str(args.threads), "--repeat", "1",
                                     "--warmup", "0"])
    finally:
        if not args.keep_14b:
            out.unlink()
    res = dit.parse_kv(stdout)
    gib = 2**30
    print(f"\nWan2.1-T2V-14B Q8_0 (random weights, {out.name}, {size / gib:.2f} GiB), bf16 compute: one transformer "
          f"forward CFG batch 2 at {spec.frames} x {spec.size} x {spec.size}; {args.threads} threads\n")
    print("| variant | load s | forward s | peak RSS GiB | peak anonymous GiB | peak file-backed GiB | "
          "file + peak anonymous GiB |")
    print("|---|---|---|---|---|---|---|")
    print(f"| ditgen Q8_0 (bf16 compute) | {float(res['load_seconds']):.2f} | {float(res['forward_seconds']):.2f} | "
          f"{int(res['peak_rss_bytes']) / gib:.2f} | {peaks['RssAnon'] / gib:.2f} | {peaks['RssFile'] / gib:.2f} | "
          f"{(size + peaks['RssAnon']) / gib:.2f} |")


# ---------------------------------------------------------------------------
# quality: the shipped defaults, float and int8


def run_ditgen_cli(args, config: Path, output: Path, int8: bool, extra: list[str]) -> float:
    """One `ditgen` run into output's folder (emptied first); its seconds."""
    shutil.rmtree(output.parent, ignore_errors=True)
    output.parent.mkdir(parents=True)
    cmd = [str(args.build / "ditgen"), "--config", str(config), "--output", str(output), "--threads",
           str(args.threads), "--quiet", "--set", "output.grid=false"] + extra
    cmd += ["--set", "model.quantize=int8"] if int8 else []
    t0 = time.perf_counter()
    dit.run(cmd)
    return time.perf_counter() - t0


def image_scores(config: Path, prefix: Path) -> dict:
    """Colour / shape / both agreement of the image default's outputs."""
    import numpy as np
    from PIL import Image
    from shapes_dataset import classify

    labels = json.loads(config.read_text())["generate"]["class_labels"]
    ok = {"colour": 0, "shape": 0, "both": 0}
    for i, label in enumerate(labels):
        colour, shape = label.split()
        c, s = classify(np.array(Image.open(f"{prefix}_{i:04d}.png").convert("RGB")))
        ok["colour"] += c == colour
        ok["shape"] += s == shape
        ok["both"] += c == colour and s == shape
    return {"outputs": len(labels), **ok}


def bench_quality(args) -> None:
    import video_quality
    from shapes_video_dataset import CAPTIONS

    rows = []
    image_cfg, video_cfg = REPO / "configs" / "shapes-image.json", REPO / "configs" / "default.json"
    captions = args.workdir / "quality" / "captions.txt"
    for int8 in (False, True):
        name = "int8" if int8 else "as shipped"
        prefix = args.workdir / "quality" / f"image-{'int8' if int8 else 'float'}" / "img"
        seconds = run_ditgen_cli(args, image_cfg, prefix.with_suffix(".png"), int8, [])
        s = image_scores(image_cfg, prefix)
        rows.append(("image default (configs/shapes-image.json)", name, seconds,
                     f"colour {s['colour']}/{s['outputs']}, shape {s['shape']}/{s['outputs']}, "
                     f"both {s['both']}/{s['outputs']}"))
        print(f"  {rows[-1]}", flush=True)
        prefix = args.workdir / "quality" / f"video-{'int8' if int8 else 'float'}" / "c"
        captions.parent.mkdir(parents=True, exist_ok=True)
        captions.write_text("\n".join(CAPTIONS) + "\n")
        seconds = run_ditgen_cli(args, video_cfg, prefix.with_suffix(".png"), int8,
                                 ["--prompt-file", str(captions), "--set", "output.format=png", "--set",
                                  "output.fps=null", "--set", "output.crf=null"])
        print(f"video default, {name}:", flush=True)
        ok, n = video_quality.report(video_quality.ditgen_clips(str(prefix)))
        rows.append(("video default (configs/default.json, all 180 captions)", name, seconds,
                     ", ".join(f"{k} {ok[k]}/{n}" for k in ("colour", "shape", "motion"))))
        print(f"  {rows[-1]}", flush=True)
    print("\nThe shipped defaults as configured (model.dtype auto) and with --set model.quantize=int8; "
          f"{args.threads} threads\n")
    print("| model | weights | run seconds | agreement |")
    print("|---|---|---|---|")
    for model, name, seconds, score in rows:
        print(f"| {model} | {name} | {seconds:.1f} | {score} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parts", default=",".join(PARTS))
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/ditgen-bench"))
    ap.add_argument("--build", type=Path, default=REPO / "build")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--keep-14b", action="store_true", help="keep the 14B Q8_0 file (15 GB) under --workdir")
    ap.add_argument("--profile", action="store_true", help="one bench_forward --profile run per ditgen variant")
    ap.add_argument("--small", action="store_true", help="tiny models: checks the script only (wan part)")
    args = ap.parse_args()
    parts = [p for p in args.parts.split(",") if p]
    for p in parts:
        if p not in PARTS:
            ap.error(f"--parts: {p} is not one of {', '.join(PARTS)}")
    if REPO in args.workdir.resolve().parents:
        sys.exit("--workdir must lie outside the repository (the weights are gigabytes)")
    for program in ("ditgen", "scripts/bench/cpp/bench_forward", "scripts/bench/cpp/make_random_gguf"):
        if not (args.build / program).exists():
            sys.exit(f"{args.build / program}: not found; build it (-DDITGEN_BENCHMARKS=ON, targets ditgen "
                     "bench_forward make_random_gguf)")
    args.workdir.mkdir(parents=True, exist_ok=True)
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    print(f"CPU: {cpu}; {os.cpu_count()} cores, {args.threads} threads; {time.strftime('%Y-%m-%d')}; "
          f"parts {', '.join(parts)}", flush=True)
    if args.small:
        parts = [p for p in parts if p == "wan"]
    for part in parts:
        {"wan": bench_wan, "dit": bench_dit, "wan14b": bench_wan14b, "quality": bench_quality}[part](args)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Benchmark a video model's two heavy stages on random weights of the real
sizes, ditgen against diffusers in float32 and bfloat16: one transformer
forward (batch 2 = one CFG step) and the VAE decode of the same frames;
median seconds and peak RSS.  A benchmark, not a test.

Models (--model):

  wan2.1-1.3b   Wan 2.1 T2V-1.3B (issue 34's benchmark; scripts/bench/bench_wan.py
                is this script with --model wan2.1-1.3b): 17 frames of
                256 x 256, latents (16, 5, 32, 32), 512 text rows of 4096.
  wan2.2-ti2v-5b  Wan 2.2 TI2V-5B's transformer (the image-to-video issue's
                benchmark; --parts transformer: ditgen does not read its VAE):
                17 frames of 256 x 256, latents (48, 5, 16, 16) (its VAE
                compresses space 16x), 512 text rows of 4096, a timestep per
                token as WanImageToVideoPipeline's expand_timesteps gives
                them: 0 on the first latent frame's tokens, 500 elsewhere
                (ditgen: bench_forward --first-frame-clean).
  cogvideox-2b  CogVideoX-2b: 9 frames of 256 x 256, latents (3, 16, 32, 32)
                (diffusers' transformer takes (B, F, C, H, W)), 226 text rows
                of 4096 (its max_text_seq_length).
  wan2.2-ti2v-5b-vae  Wan 2.2 TI2V-5B's VAE alone (--parts vae: is_residual,
                patch_size 2, 16 pixels a latent): 17 frames of 256 x 256,
                latents (48, 5, 16, 16). Its transformer's random weights
                (20 GB in float32) are not written.

Usage (from the repository root, after building the bench programs; the
Wan-era Python environment, scripts/fixtures/requirements-wan.txt:
python3 -m venv /root/venv-wan && /root/venv-wan/bin/pip install -r
scripts/fixtures/requirements-wan.txt):

    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DDITGEN_BENCHMARKS=ON
    cmake --build build --target bench_forward bench_vae_decode -j
    /root/venv-wan/bin/python scripts/bench/bench_video_models.py \\
        --model wan2.1-1.3b|cogvideox-2b|wan2.2-ti2v-5b-vae \\
        [--bench-dir build/scripts/bench/cpp] [--workdir /tmp/ditgen-bench] \\
        [--threads 2] [--repeat 3] [--warmup 1] [--rounds 1] \\
        [--dtypes float32,bfloat16] [--parts transformer,vae] \\
        [--frames F] [--size S] [--height H --width W] [--tiling] [--small] [--compare]

Needs torch and diffusers (torch 2.x, diffusers 0.42).  What it does:

  1. Creates once, cached under --workdir (never inside the repository), a
     random-weight model directory (<workdir>/Wan2.1-T2V-1.3B-random/,
     <workdir>/CogVideoX-2b-random/): model_index.json, transformer/ (the
     diffusers class from the published config in configs/models/,
     diffusers' own initialisation after torch.manual_seed(0), float32
     safetensors: about 5.7 GB for Wan, 6.7 GB for CogVideoX-2b) and vae/
     (the VAE class from that directory's vae/config.json).  --small writes
     a tiny model of the same layout instead (2 layers, 2 heads of 16, a
     narrow VAE), to check the script itself in seconds; its figures mean
     nothing.  The model is written by a child process: a child's
     ru_maxrss starts from its parent's at fork, so the parent never
     imports torch.
  2. Runs --rounds rounds, each, for every dtype of --dtypes and part of
     --parts, diffusers and then ditgen, every measurement its own
     subprocess so that each peak RSS (ru_maxrss) is that engine's alone:
       transformer: latents (2, 16, F', S/8, S/8) ~ N(0, 1) (F' = the
         VAE's latent frames of --frames), timestep 500, text embeddings
         (2, T, 4096) ~ N(0, 1); diffusers: the transformer class's
         from_pretrained(...).to(dtype) under torch.inference_mode();
         ditgen: bench_forward --model DIR --batch 2 --frames F'
         --latent-size S/8 --text-tokens T.
       vae: latents (1, C, F', S/f, S/f) -> F frames of S x S (f: 8, Wan
         2.2 TI2V's 16); diffusers:
         the VAE class's decode (Wan: its per-latent-frame causal cache;
         CogVideoX: its latent-frame batches, no tiling); ditgen:
         bench_vae_decode --height S --width S --frames F. --height /
         --width decode H x W instead; --tiling tiles both engines' decode
         with diffusers' default tiles (enable_tiling(); --tiling).
     --compare (vae): ditgen runs first and saves its random latents and
     frames (bench_vae_decode --save-output), diffusers decodes those
     latents, and the relative L2 of the two videos (ditgen's clamped, as
     diffusers clamps) is printed per dtype.
     Each run does --warmup untimed and --repeat timed passes; the reported
     time is the median of all timed passes over all rounds.  A
     measurement that fails (say a bench program that does not know the
     model) is reported as a row that did not run, with the program's
     message, and the rest goes on.
  3. Prints a table: per part, engine and dtype, median seconds, peak RSS,
     and the time as a fraction of diffusers' bfloat16 time and of the same
     dtype's (issue 34's goals, for Wan: transformer <= 0.85x and VAE
     decode <= 0.8x diffusers' bfloat16 time, peak RSS <= diffusers').

Both engines run with the same thread count (torch.set_num_threads and
--threads).  The machine should be otherwise idle: a concurrent build or
test run moves both engines' figures by more than the goals' margins.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class VideoModel:
    label: str             # the table's title
    published: str         # configs/models/<published>: the configs, no weights
    random_dir: str        # <workdir>/<random_dir>: the random-weight model
    transformer_class: str  # diffusers class names
    vae_class: str
    frames: int            # default output frames and side
    size: int
    text_tokens: int       # rows of text embeddings per sample
    text_dim_key: str      # the transformer config's text width
    frames_first: bool     # diffusers' transformer takes (B, F, C, H, W)
    frame_step: int        # output frame counts 1 + frame_step * k
    vae_factor: int = 8    # the VAE's spatial compression
    first_frame_clean: bool = False  # a timestep per token, 0 on the first latent frame's (TI2V)
    small_transformer: dict = field(default_factory=dict)
    small_vae: dict = field(default_factory=dict)
    vae_factor: int = 8    # pixels per latent, each side
    vae_only: bool = False  # no transformer written or run

    def latent_frames(self, frames: int) -> int:
        return (frames - 1) // 4 + 1  # both VAEs compress time 4x after the first frame


MODELS = {
    "wan2.1-1.3b": VideoModel(
        label="Wan 2.1 T2V-1.3B", published="Wan2.1-T2V-1.3B-Diffusers", random_dir="Wan2.1-T2V-1.3B-random",
        transformer_class="WanTransformer3DModel", vae_class="AutoencoderKLWan", frames=17, size=256,
        text_tokens=512, text_dim_key="text_dim", frames_first=False, frame_step=4,
        small_transformer=dict(num_attention_heads=2, attention_head_dim=16, num_layers=2, ffn_dim=64, text_dim=64,
                               freq_dim=32),
        small_vae=dict(base_dim=16)),
    "wan2.2-ti2v-5b": VideoModel(
        label="Wan 2.2 TI2V-5B", published="Wan2.2-TI2V-5B-Diffusers", random_dir="Wan2.2-TI2V-5B-random",
        transformer_class="WanTransformer3DModel", vae_class="AutoencoderKLWan", frames=17, size=256,
        text_tokens=512, text_dim_key="text_dim", frames_first=False, frame_step=4, vae_factor=16,
        first_frame_clean=True,
        small_transformer=dict(num_attention_heads=2, attention_head_dim=16, num_layers=2, ffn_dim=64, text_dim=64,
                               freq_dim=32),
        small_vae=dict(base_dim=16)),
    "cogvideox-2b": VideoModel(
        label="CogVideoX-2b", published="CogVideoX-2b", random_dir="CogVideoX-2b-random",
        transformer_class="CogVideoXTransformer3DModel", vae_class="AutoencoderKLCogVideoX", frames=9, size=256,
        text_tokens=226, text_dim_key="text_embed_dim", frames_first=True, frame_step=8,
        small_transformer=dict(num_attention_heads=2, attention_head_dim=16, num_layers=2, text_embed_dim=64,
                               time_embed_dim=32),
        small_vae=dict(block_out_channels=[32, 32, 32, 32], layers_per_block=1)),
    "wan2.2-ti2v-5b-vae": VideoModel(
        label="Wan 2.2 TI2V-5B's VAE", published="Wan2.2-TI2V-5B-Diffusers", random_dir="Wan2.2-TI2V-5B-vae-random",
        transformer_class="WanTransformer3DModel", vae_class="AutoencoderKLWan", frames=17, size=256,
        text_tokens=512, text_dim_key="text_dim", frames_first=False, frame_step=4,
        small_vae=dict(base_dim=16, decoder_base_dim=16), vae_factor=16, vae_only=True),
}


def read_config(path: Path) -> dict:
    cfg = json.loads(path.read_text())
    return {k: v for k, v in cfg.items() if not k.startswith("_")}


def make_model(spec: VideoModel, root: Path, small: bool) -> None:
    """The random-weight model directory (once: kept when complete)."""
    import torch
    import diffusers

    published = REPO / "configs" / "models" / spec.published
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    tcfg = read_config(published / "transformer" / "config.json")
    vcfg = read_config(published / "vae" / "config.json")
    if small:
        tcfg.update(spec.small_transformer)
        vcfg.update(spec.small_vae)
    torch.manual_seed(0)
    print(f"writing {root} (random weights{', small' if small else ''}) ...", file=sys.stderr, flush=True)
    if not spec.vae_only:
        getattr(diffusers, spec.transformer_class)(**tcfg).save_pretrained(root / "transformer",
                                                                          safe_serialization=True)
    # from_config, as from_pretrained reads it: keys the class does not take
    # (Wan 2.2's clip_output) are dropped with a warning.
    getattr(diffusers, spec.vae_class).from_config(vcfg).save_pretrained(root / "vae", safe_serialization=True)
    shutil.copy(published / "model_index.json", root / "model_index.json")
    (root / ".complete").write_text("")


def ensure_model(name: str, workdir: Path, small: bool) -> Path:
    """The random-weight model directory of MODELS[name] under workdir,
    written once (by a child: a process's peak RSS starts at its parent's
    at fork, so the measuring process must never hold torch or the weights)."""
    spec = MODELS[name]
    model = workdir / (spec.random_dir.replace("-random", "-tiny-random") if small else spec.random_dir)
    if not (model / ".complete").exists():
        subprocess.run([sys.executable, __file__, "--model", name, "--make-model", str(model)]
                       + (["--small"] if small else []), check=True)
    return model


# One diffusers measurement, run in a child process (python -c) so that its
# ru_maxrss is its own; prints one JSON line.
TORCH_CHILD = r"""
import json, resource, sys, time
import torch
import diffusers
a = json.loads(sys.argv[1])
torch.set_num_threads(a["threads"])
dtype = getattr(torch, a["dtype"])
g = torch.Generator().manual_seed(0)
times = []
with torch.inference_mode():
    if a["part"] == "transformer":
        cls = getattr(diffusers, a["transformer_class"])
        m = cls.from_pretrained(a["model"], subfolder="transformer").to(dtype).eval()
        c, f, n = m.config.in_channels, a["latent_frames"], a["latent"]
        x = torch.randn(*((2, f, c, n, n) if a["frames_first"] else (2, c, f, n, n)), generator=g).to(dtype)
        text = torch.randn(2, a["text_tokens"], m.config[a["text_dim_key"]], generator=g).to(dtype)
        if a.get("inputs"):  # bench_forward --save-output's latents and text, for the same inputs as ditgen's
            from safetensors.torch import load_file
            given = load_file(a["inputs"])
            for name, have in (("latents", x), ("text", text)):
                if tuple(given[name].shape) != tuple(have.shape):
                    sys.exit(f"{a['inputs']}: {name} {tuple(given[name].shape)}, expected {tuple(have.shape)}")
            x, text = given["latents"].to(dtype), given["text"].to(dtype)
        t = torch.tensor([500.0, 500.0])
        if a["first_frame_clean"]:  # expand_timesteps: a timestep per token (patch 2 x 2), the first frame's 0
            per_frame = (n // 2) * (n // 2)
            t = torch.full((2, f * per_frame), 500.0)
            t[:, :per_frame] = 0.0
        run = lambda: m(hidden_states=x, timestep=t, encoder_hidden_states=text, return_dict=False)[0]
    else:
        cls = getattr(diffusers, a["vae_class"])
        m = cls.from_pretrained(a["model"], subfolder="vae").to(dtype).eval()
        c = m.config.z_dim if "z_dim" in m.config else m.config.latent_channels
        z = torch.randn(1, c, a["latent_frames"], a["latent_h"], a["latent_w"], generator=g).to(dtype)
        if a["tiling"]:
            m.enable_tiling()  # diffusers' default tiles (Wan: 256 x 256 every 192)
        if a.get("inputs"):  # bench_vae_decode --save-output's latents (C, F', h, w), for ditgen's inputs
            from safetensors.torch import load_file
            z = load_file(a["inputs"])["latents"][None].to(dtype)
        run = lambda: m.decode(z, return_dict=False)[0]
    for i in range(a["warmup"] + a["repeat"]):
        t0 = time.perf_counter()
        out = run()
        dt = time.perf_counter() - t0
        if i >= a["warmup"]:
            times.append(dt)
        if i == 0 and a.get("save"):
            from safetensors.torch import save_file
            save_file({"output": out.float().contiguous()}, a["save"])
print(json.dumps({"seconds": times, "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "shape": list(out.shape)}))
"""


class Failed(Exception):
    """A measurement whose process failed; the message says why."""


def checked(cmd: list[str]) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        lines = [line for line in (r.stderr or r.stdout).strip().splitlines() if line.strip()]
        raise Failed(f"exit {r.returncode}: {lines[-1] if lines else '(no output)'}".replace("|", "/"))
    return r.stdout


def run_torch(args, spec: VideoModel, model: Path, part: str, dtype: str, inputs: Path | None = None,
              save: Path | None = None) -> dict:
    """diffusers' median seconds and peak RSS; the transformer's inputs from
    `inputs` (a bench_forward --save-output file) when given, its first
    output saved to `save` (float32 safetensors, "output") when given."""
    payload = dict(part=part, dtype=dtype, model=str(model), threads=args.threads, warmup=args.warmup,
                   repeat=args.repeat, latent=args.size // spec.vae_factor, latent_h=args.height // spec.vae_factor,
                   latent_w=args.width // spec.vae_factor, tiling=args.tiling,
                   latent_frames=spec.latent_frames(args.frames), first_frame_clean=spec.first_frame_clean,
                   text_tokens=spec.text_tokens, text_dim_key=spec.text_dim_key, frames_first=spec.frames_first,
                   transformer_class=spec.transformer_class, vae_class=spec.vae_class,
                   inputs=str(inputs) if inputs else None, save=str(save) if save else None)
    out = checked([sys.executable, "-c", TORCH_CHILD, json.dumps(payload)])
    return json.loads(out.strip().splitlines()[-1])


def run_ditgen(args, spec: VideoModel, model: Path, part: str, dtype: str, extra: tuple[str, ...] = ()) -> dict:
    """ditgen's median seconds and peak RSS; `extra`: more bench_forward
    options (--transformer-file, --quantize, --save-output)."""
    common = ["--dtype", dtype, "--threads", str(args.threads), "--repeat", str(args.repeat),
              "--warmup", str(args.warmup), *extra]
    if part == "transformer":
        cmd = [str(args.bench_dir / "bench_forward"), "--model", str(model), "--batch", "2",
               "--frames", str(spec.latent_frames(args.frames)), "--latent-size", str(args.size // spec.vae_factor),
               "--text-tokens", str(spec.text_tokens)] + (["--first-frame-clean"] if spec.first_frame_clean else [])
        key = "forward_all"
    else:
        cmd = [str(args.bench_dir / "bench_vae_decode"), "--model", str(model), "--height", str(args.height),
               "--width", str(args.width), "--frames", str(args.frames)] + (["--tiling"] if args.tiling else [])
        key = "decode_all"
    out = checked(cmd + common)
    figures = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    if key not in figures:
        raise Failed(f"no {key} line in {Path(cmd[0]).name}'s output")
    return {"seconds": [float(s) for s in figures[key].split(",")],
            "peak_rss_bytes": int(figures["peak_rss_bytes"])}


def compare_paths(args, dtype: str) -> tuple[Path, Path]:
    """--compare's files: ditgen's latents and frames, diffusers' frames."""
    return (args.workdir / f"compare-{args.model}-{dtype}-ditgen.safetensors",
            args.workdir / f"compare-{args.model}-{dtype}-diffusers.safetensors")


def compare_files(args, part: str, engine: str, dtype: str) -> dict:
    """--compare (vae): ditgen saves its latents and frames, diffusers then
    decodes those latents and saves its frames (the run's other options)."""
    if not args.compare or part != "vae":
        return {}
    ours, theirs = compare_paths(args, dtype)
    return {"extra": ("--save-output", str(ours))} if engine == "ditgen" else {"inputs": ours, "save": theirs}


def videos_rel_l2(args, dtype: str) -> str:
    """Relative L2 of ditgen's frames (clamped, as the pipeline and diffusers
    clamp) to diffusers' decode of the same latents."""
    import numpy as np
    from safetensors.numpy import load_file

    ours, theirs = compare_paths(args, dtype)
    if not ours.exists() or not theirs.exists():
        return "not compared (a run failed)"
    a = np.clip(load_file(str(ours))["output"].astype(np.float64), -1.0, 1.0).transpose(1, 0, 2, 3)
    b = load_file(str(theirs))["output"].astype(np.float64)[0]
    if a.shape != b.shape:
        return f"shapes differ: {a.shape} vs {b.shape}"
    return f"{np.linalg.norm(a - b) / np.linalg.norm(b):.3g}"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=sorted(MODELS), required=True)
    p.add_argument("--bench-dir", type=Path, default=REPO / "build" / "scripts" / "bench" / "cpp")
    p.add_argument("--workdir", type=Path, default=Path("/tmp/ditgen-bench"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--parts", default="transformer,vae")
    p.add_argument("--frames", type=int, help="output frames (default: the model's; 1 + 4k for Wan, 1 + 8k for CogVideoX)")
    p.add_argument("--size", type=int, help="the frames' side in pixels, a multiple of 16 (default 256)")
    p.add_argument("--height", type=int, help="the VAE decode's height in pixels, a multiple of 16 (default --size)")
    p.add_argument("--width", type=int, help="the VAE decode's width in pixels, a multiple of 16 (default --size)")
    p.add_argument("--tiling", action="store_true",
                   help="the VAE decode tiled: diffusers' enable_tiling() and bench_vae_decode --tiling, both with "
                        "diffusers' default tiles")
    p.add_argument("--small", action="store_true", help="a tiny model of the same layout: checks the script only")
    p.add_argument("--compare", action="store_true",
                   help="vae: diffusers decodes ditgen's latents, and the two videos' relative L2 is printed")
    p.add_argument("--make-model", type=Path, help=argparse.SUPPRESS)  # the child that writes the model
    args = p.parse_args(argv)
    spec = MODELS[args.model]
    if args.make_model:
        make_model(spec, args.make_model, args.small)
        return
    args.frames = args.frames or spec.frames
    args.size = args.size or spec.size
    if args.frames < 1 or (args.frames - 1) % spec.frame_step:
        p.error(f"--frames: {spec.label} makes 1 + {spec.frame_step}k frames")
    args.height = args.height or args.size
    args.width = args.width or args.size
    step = 2 * spec.vae_factor
    for name in ("size", "height", "width"):
        if getattr(args, name) < step or getattr(args, name) % step:
            p.error(f"--{name}: a multiple of {step} (the VAE's {spec.vae_factor} times the transformer's patch of 2)")
    if REPO in args.workdir.resolve().parents:
        sys.exit("--workdir must lie outside the repository (the weights are gigabytes)")
    dtypes, parts = args.dtypes.split(","), args.parts.split(",")
    if spec.vae_only and parts != ["vae"]:
        p.error(f"--parts: {args.model} benchmarks the VAE alone (--parts vae)")
    model = ensure_model(args.model, args.workdir, args.small)

    times: dict = {}
    rss: dict = {}
    failed: dict = {}
    for _ in range(args.rounds):
        for part in parts:
            for dtype in dtypes:
                # --compare: ditgen first, so that diffusers decodes its latents.
                engines = (("diffusers", run_torch), ("ditgen", run_ditgen))
                for engine, run in (engines[::-1] if args.compare else engines):
                    key = (part, engine, dtype)
                    try:
                        r = run(args, spec, model, part, dtype, **compare_files(args, part, engine, dtype))
                    except Failed as e:
                        failed[key] = str(e)
                        print(f"{part} {engine} {dtype}: did not run: {e}", file=sys.stderr, flush=True)
                        continue
                    times.setdefault(key, []).extend(r["seconds"])
                    rss[key] = max(rss.get(key, 0), r["peak_rss_bytes"])
                    print(f"{part} {engine} {dtype}: {statistics.median(r['seconds']):.3f} s, "
                          f"peak RSS {r['peak_rss_bytes'] / 2**30:.2f} GiB", file=sys.stderr, flush=True)

    if args.compare and "vae" in parts:
        for dtype in dtypes:
            print(f"vae {dtype}: ditgen vs diffusers decode of the same latents, relative L2 "
                  f"{videos_rel_l2(args, dtype)}", file=sys.stderr, flush=True)

    side = f"{args.size} x {args.size}"
    lf, ls = spec.latent_frames(args.frames), args.size // spec.vae_factor
    print(f"\n{spec.label}{' (SMALL: script check only)' if args.small else ''}, random weights: "
          f"transformer forward CFG batch 2 at {args.frames} x {side} ({lf} x {ls} x {ls} latents, "
          f"{spec.text_tokens} text rows), VAE decode of {args.frames} frames of {args.height} x {args.width}"
          f"{' tiled (diffusers default tiles)' if args.tiling else ''}; "
          f"{args.threads} threads, median of {args.rounds} x {args.repeat} passes\n")
    print("| part | engine | dtype | seconds | peak RSS GiB | / diffusers bf16 time | / diffusers same dtype |")
    print("|---|---|---|---|---|---|---|")
    for part in parts:
        base = times.get((part, "diffusers", "bfloat16"))
        for engine in ("diffusers", "ditgen"):
            for dtype in dtypes:
                key = (part, engine, dtype)
                if key not in times:
                    print(f"| {part} | {engine} | {dtype} | not run: {failed.get(key, '?')} | - | - | - |")
                    continue
                t = statistics.median(times[key])
                same = times.get((part, "diffusers", dtype))
                vs_bf16 = f"{t / statistics.median(base):.2f}x" if base else "-"
                vs_same = f"{t / statistics.median(same):.2f}x" if same else "-"
                print(f"| {part} | {engine} | {dtype} | {t:.3f} | {rss[key] / 2**30:.2f} | {vs_bf16} | {vs_same} |")


if __name__ == "__main__":
    main()

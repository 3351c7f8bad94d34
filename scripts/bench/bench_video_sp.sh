#!/usr/bin/env bash
# bench_video_sp.sh: video sequence parallelism on this machine, in one run:
# a Latte-shaped model timed in one process and under sp = 2 with dsp,
# ulysses and ring, with the bytes each rank sent beside `ditgen plan`'s.
#
# What it measures
#   Model: LatteTransformer3DModel with random weights (diffusers' own class,
#   saved once by scripts/models/make_random_latte.py): 8 layers (8 spatial + 8 temporal blocks),
#   6 heads x 64 = 384 wide, patch 2, in 4 / out 8 channels, video_length 16,
#   caption_channels 40 (the tiny T5 of tests/fixtures/latte_tiny, whose
#   tokenizer, text encoder, VAE and scheduler complete the directory).
#   Shapes: 16 frames of 16x16 latents (128x128 frames), one prompt with CFG:
#   2 x 16 x 64 = 2048 tokens through every block.
#   Runs (DDIM, STEPS steps, float32, CPU), each REPEAT times, median:
#     single process, 1 thread     (the per-rank reference: 1 thread a rank)
#     single process, 2 threads    (what one process gets from both cores)
#     mpirun -np 2, sp 2, dsp / ulysses / ring, 1 thread per rank
#   Reported per run: the denoising time (the progress line's s/it x steps,
#   rank 0), rank 0's time inside collectives (DITGEN_PROFILE's
#   "communication": waiting for the peer included), their difference (rank
#   0's compute), the time in the transformer's GEMMs (the projections and
#   MLPs: the work sp divides exactly), and the bytes rank 0 sent per step
#   (DITGEN_TEST_COMM_STATS) beside `ditgen plan`'s table for 2 ranks.
#
# On 2 cores, two ranks of one thread use the same cores one process of two
# threads does, so sp cannot show a real speed-up here. What it can show:
# each rank computes about half of the one-thread single process (its half
# of the frames or tokens), and the bytes it sends equal the plan's formula
# (dsp: 2 all-to-alls per layer; ulysses: 4 per spatial attention).
#
# Run (from the repo root):
#   scripts/bench/bench_video_sp.sh
# Environment: PYTHON (default /root/venv-ditgen/bin/python, the reference
#   Python environment of scripts/requirements.txt: python3 -m venv /root/venv-ditgen && /root/venv-ditgen/bin/pip install -r scripts/requirements.txt;
#   only to make the model once), DITGEN (default build-layers/ditgen), BENCH_DIR (default
#   /root/bench/latte-sp-random), STEPS (4), REPEAT (3).
set -euo pipefail

REPO="$(cd "$(dirname "$0")/../.." && pwd)"
PYTHON="${PYTHON:-/root/venv-ditgen/bin/python}"
DITGEN="${DITGEN:-$REPO/build-layers/ditgen}"
BENCH_DIR="${BENCH_DIR:-/root/bench/latte-sp-random}"
STEPS="${STEPS:-4}"
REPEAT="${REPEAT:-3}"
WORK="$(mktemp -d /tmp/bench_video_sp.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

echo "== machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; load: $(cut -d' ' -f1-3 /proc/loadavg)"

# ---------------------------------------------------------------- 1. model dir
if [ ! -f "$BENCH_DIR/transformer/diffusion_pytorch_model.safetensors" ]; then
  echo "== making $BENCH_DIR (random Latte-shaped transformer)"
  "$PYTHON" "$REPO/scripts/models/make_random_latte.py" "$BENCH_DIR" --layers 8 --heads 6 --head-dim 64 \
    --sample-size 16 --video-length 16
fi

cat > "$WORK/run.json" <<EOF
{
  "model": { "path": "$BENCH_DIR", "dtype": "float32" },
  "generate": {
    "prompts": ["a red circle moving left"], "negative_prompt": "", "frames": 16,
    "height": 128, "width": 128, "seed": 0, "steps": $STEPS,
    "guidance_scale": 7.5, "scheduler": "ddim", "batch_size": 1
  },
  "output": { "path": "$WORK/out/video.png", "format": "png" }
}
EOF

# ------------------------------------------------------------------ 2. runs
# run NAME RANKS THREADS [--set ...]: appends "NAME denoise_s comm_s gemm_s bytes_per_step" to $WORK/results.
run() {
  local name=$1 ranks=$2 threads=$3; shift 3
  local log="$WORK/$name.log" stats="$WORK/$name.comm.json"
  local launcher=()
  if [ "$ranks" -gt 1 ]; then
    launcher=(mpirun --oversubscribe -np "$ranks" -x OMP_NUM_THREADS=1 -x DITGEN_PROFILE -x DITGEN_TEST_COMM_STATS)
  fi
  DITGEN_PROFILE=1 DITGEN_TEST_COMM_STATS="$stats" "${launcher[@]}" "$DITGEN" --config "$WORK/run.json" \
    --device cpu --threads "$threads" "$@" >"$log" 2>&1 || { echo "$name FAILED:"; tail -20 "$log"; exit 1; }
  "$PYTHON" - "$log" "$stats" "$name" "$STEPS" >>"$WORK/results" <<'EOF'
import sys, re, json
log = open(sys.argv[1]).read().replace("\r", "\n")
steps = int(sys.argv[4])
m = re.findall(r"denoise: step (\d+)/(\d+) ([\d.]+) s/it", log)
denoise = float(m[-1][2]) * steps
comm = re.search(r"^\s+communication\s+([\d.]+) s", log, re.M)
comm = float(comm.group(1)) if comm else 0.0
# The transformer's GEMMs (no communication nested in them at tp 1): the
# work that sp divides exactly.
gemm = sum(float(v) for v in re.findall(
    r"^\s+(?:qkv_proj|cross_qkv_proj|out_proj|mlp_in|mlp_out)\s+([\d.]+) s", log, re.M))
s = json.load(open(sys.argv[2]))
per_step = (s["tp"] + s["sp"] + s["cp"]) / s["forwards"]
print(sys.argv[3], f"{denoise:.3f}", f"{comm:.3f}", f"{gemm:.3f}", int(per_step))
EOF
}

echo "== runs: $STEPS DDIM steps, 16 frames of 16x16 latents, CFG; $REPEAT repeats each"
for i in $(seq "$REPEAT"); do
  run single_t1 1 1
  run single_t2 1 2
  for mode in dsp ulysses ring; do
    run "sp2_$mode" 2 1 --set parallel.sp=2 --set parallel.sp_mode=$mode
  done
  echo "   repeat $i done; load: $(cut -d' ' -f1-3 /proc/loadavg)"
done

# ------------------------------------------------------------------ 3. table
echo
echo "== ditgen plan --world-size 2 (the same run)"
"$DITGEN" plan --config "$WORK/run.json" --world-size 2
echo
"$PYTHON" - "$WORK/results" <<'EOF'
import sys, statistics
rows = {}
for line in open(sys.argv[1]):
    name, d, c, g, b = line.split()
    rows.setdefault(name, []).append((float(d), float(c), float(g), int(b)))
med = lambda v: statistics.median(v)
def human(b):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if b < 1024 or unit == "GiB": return f"{b:.2f} {unit}" if unit != "B" else f"{b:.0f} B"
        b /= 1024
ref = med([r[0] for r in rows["single_t1"]])
ref_gemm = med([r[2] for r in rows["single_t1"]])
print(f"{'run':14s} {'denoise s':>10s} {'comm s':>8s} {'compute s':>10s} {'/ single 1t':>12s} "
      f"{'GEMM s':>8s} {'/ single 1t':>12s} {'bytes/step sent':>16s}")
for name in ["single_t1", "single_t2", "sp2_dsp", "sp2_ulysses", "sp2_ring"]:
    v = rows[name]
    d, c, g = med([r[0] for r in v]), med([r[1] for r in v]), med([r[2] for r in v])
    print(f"{name:14s} {d:10.2f} {c:8.2f} {d - c:10.2f} {(d - c) / ref:12.2f} {g:8.2f} {g / ref_gemm:12.2f} "
          f"{human(v[0][3]):>16s}")
print("(medians; rank 0's figures for the sp runs; compute = denoise - comm; GEMM = the transformer's projections "
      "and MLPs; bytes: rank 0, per denoising step, measured)")
EOF

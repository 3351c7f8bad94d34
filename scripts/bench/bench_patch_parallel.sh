#!/usr/bin/env bash
# bench_patch_parallel.sh: xDiT's patch strategies beside sequence
# parallelism at 4 ranks on this machine, on the two trained default models:
# PipeFusion (pp, stale keys and values after a warm-up), Ulysses, ring,
# naive patch (sp 4) and, for the video model, dsp, each against the single
# process.
#
# Models: the default image model (configs/shapes-image.json:
# samples/dit-shapes, a 6-layer DiT of 4 heads x 32, 8x8 tokens; 30 images
# in one batch, CFG) and the default video model (configs/default.json:
# samples/latte-shapes, 4 layers, 16 frames of 4x4 tokens; 6 videos, CFG),
# 25 DDIM steps, bfloat16 where the CPU has it. Per layout:
#   bytes/step     what rank 0 sent per denoising step over all its groups
#                  (DITGEN_TEST_COMM_STATS), beside `ditgen plan`'s figure;
#   weights/rank   `ditgen plan`'s per-rank weight memory (PipeFusion: rank 0
#                  holds its stage's layers only);
#   compute s      rank 0's time in the transformer's GEMMs and attention
#                  (DITGEN_PROFILE; median of REPEAT runs), beside the
#                  one-thread single process's: 4 ranks share 2 cores here,
#                  so these are inflated by time-sharing and only roughly say
#                  what share of the work a rank does; not a speed-up;
#   PSNR           of the PNGs (images, or every frame of the videos) against
#                  the single process's (median and minimum, dB; inf =
#                  identical bytes): PipeFusion after its warm-up and naive
#                  patch approximate, Ulysses, ring and dsp are exact.
#
# Run (from the repo root): scripts/bench/bench_patch_parallel.sh
# Environment: DITGEN (default build/ditgen), PYTHON (default
#   /root/venv-ditgen/bin/python: numpy and Pillow for the PSNR and the table;
#   the reference Python environment, scripts/requirements.txt:
#   python3 -m venv /root/venv-ditgen && /root/venv-ditgen/bin/pip install -r scripts/requirements.txt),
#   STEPS (25), REPEAT (3).
set -euo pipefail

REPO="$(cd "$(dirname "$0")/../.." && pwd)"
DITGEN="${DITGEN:-$REPO/build/ditgen}"
PYTHON="${PYTHON:-/root/venv-ditgen/bin/python}"
STEPS="${STEPS:-25}"
REPEAT="${REPEAT:-3}"
WORK="$(mktemp -d /tmp/bench_patch_parallel.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$REPO"

echo "== machine: $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg); $STEPS steps, $REPEAT repeats"

# run CONFIG NAME RANKS LABEL [--set ...]: REPEAT generations into
# $WORK/NAME/, their logs (NAME.log.1 ...), rank 0's comm stats, the plan,
# and a line "NAME<TAB>LABEL" in $WORK/runs.
run() {
  local config=$1 name=$2 ranks=$3 label=$4; shift 4
  for i in $(seq "$REPEAT"); do run_once "$config" "$name" "$ranks" "$@"; mv "$WORK/$name.log" "$WORK/$name.log.$i"; done
  "$DITGEN" --device cpu plan --config "$config" --set generate.steps="$STEPS" "$@" >"$WORK/$name.plan" 2>&1
  printf '%s\t%s\n' "$name" "$label" >>"$WORK/runs"
  echo "   $name done"
}

run_once() {
  local config=$1 name=$2 ranks=$3; shift 3
  # Rank 0 alone profiles, so the log holds one table of times.
  local launcher=(env DITGEN_PROFILE=1)
  if [ "$ranks" -gt 1 ]; then
    launcher=(mpirun --oversubscribe -np "$ranks" -x OMP_NUM_THREADS=1 -x DITGEN_TEST_COMM_STATS
              bash -c '[ "$OMPI_COMM_WORLD_RANK" = 0 ] && export DITGEN_PROFILE=1; exec "$@"' rank)
  fi
  DITGEN_TEST_COMM_STATS="$WORK/$name.comm.json" "${launcher[@]}" "$DITGEN" --config "$config" \
    --device cpu --threads 1 --set generate.steps="$STEPS" --set output.grid=false --set output.format=png --set output.fps=null --set output.crf=null \
    --output "$WORK/$name/out.png" "$@" >"$WORK/$name.log" 2>&1 || { echo "$name FAILED:"; tail -20 "$WORK/$name.log"; exit 1; }
}

# table REFERENCE GLOB: the markdown table of the runs listed since the last table.
table() {
  "$PYTHON" - "$WORK" "$REPO/scripts/tools/compare_images.py" "$1" "$2" <<'EOF'
import json, re, statistics, subprocess, sys
from pathlib import Path
work, compare, reference, glob = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
runs = [line.rstrip("\n").split("\t") for line in (work / "runs").read_text().splitlines()]
def secs(log, names):
    return sum(float(v) for v in re.findall(r"^\s+(?:%s)\s+([\d.]+) s" % "|".join(names), log, re.M))
def plan_cell(plan, column):
    lines = plan.splitlines()
    head = next(i for i, l in enumerate(lines) if re.match(r"layout\s{2,}", l))
    cols = re.split(r"\s{2,}", lines[head].strip())
    vals = re.split(r"\s{2,}", lines[head + 1].strip())
    return vals[cols.index(column)]
def human(b):
    for unit in ["B", "KiB", "MiB", "GiB"]:
        if b < 1024 or unit == "GiB":
            return f"{b:.0f} {unit}" if unit == "B" else f"{b:.2f} {unit}"
        b /= 1024
print("| layout | bytes/step, rank 0 (measured) | plan | weights/rank (plan) | rank 0 compute s | PSNR vs single, median / min |")
print("|---|---|---|---|---|---|")
single_compute = None
for name, label in runs:
    plan = (work / f"{name}.plan").read_text()
    compute = statistics.median(
        secs(log.read_text().replace("\r", "\n"), ["qkv_proj", "out_proj", "mlp_in", "mlp_out", "attention"])
        for log in sorted(work.glob(f"{name}.log.*")))
    if name == reference:
        single_compute = compute
        psnr = "reference"
    else:
        out = subprocess.run([sys.executable, compare, str(work / reference), str(work / name), "--glob", glob],
                             capture_output=True, text=True, check=True).stdout
        m = re.search(r"(\d+) images: PSNR median (\S+) dB, min ([^,\s]+)", out)
        psnr = f"{m.group(2)} / {m.group(3)} dB ({m.group(1)} images)"
    s = json.loads((work / f"{name}.comm.json").read_text())
    sent = (s["tp"] + s["sp"] + s["cp"] + s.get("pp", 0)) / s["forwards"]
    ratio = f"{compute:.2f} ({compute / single_compute:.2f}x single)"
    print(f"| {label} | {human(sent)} | {plan_cell(plan, 'comm/step')} | {plan_cell(plan, 'weights/rank')} | {ratio} | {psnr} |")
EOF
  rm "$WORK/runs"
}

IMAGE=configs/shapes-image.json
echo "== $IMAGE"
run $IMAGE single 1 "single process"
run $IMAGE ulysses 4 "sp4 ulysses" --set parallel.sp=4 --set parallel.sp_mode=ulysses
run $IMAGE ring 4 "sp4 ring" --set parallel.sp=4 --set parallel.sp_mode=ring
run $IMAGE naive_patch 4 "sp4 naive_patch" --set parallel.sp=4 --set parallel.sp_mode=naive_patch
run $IMAGE pipefusion_w1 4 "pp4, 4 patches, warm-up 1" --set parallel.pp=4 --set parallel.warmup_steps=1
run $IMAGE pipefusion_w1_m8 4 "pp4, 8 patches, warm-up 1" --set parallel.pp=4 --set parallel.patches=8
run $IMAGE pipefusion_w5 4 "pp4, 4 patches, warm-up 5" --set parallel.pp=4 --set parallel.warmup_steps=5
run $IMAGE pipefusion_sync 4 "pp4, warm-up = all steps" --set parallel.pp=4 --set parallel.warmup_steps="$STEPS"
run $IMAGE pipefusion_sp2 4 "pp2 x sp2 ulysses, 4 patches, warm-up 1" --set parallel.pp=2 --set parallel.sp=2 \
  --set parallel.patches=4
echo
echo "== ditgen plan of the pp4 run"
cat "$WORK/pipefusion_w1.plan"
echo
table single '*_[0-9][0-9][0-9][0-9].png'

VIDEO=configs/default.json
echo
echo "== $VIDEO"
run $VIDEO v_single 1 "single process"
run $VIDEO v_dsp 4 "sp4 dsp" --set parallel.sp=4 --set parallel.sp_mode=dsp
# No "sp4 ulysses" row: the video model has 6 heads, and Ulysses needs sp | heads.
run $VIDEO v_ring 4 "sp4 ring" --set parallel.sp=4 --set parallel.sp_mode=ring
run $VIDEO v_naive_patch 4 "sp4 naive_patch" --set parallel.sp=4 --set parallel.sp_mode=naive_patch
run $VIDEO v_pipefusion_w1 4 "pp4, 4 patches, warm-up 1" --set parallel.pp=4
run $VIDEO v_pipefusion_sp2 4 "pp2 x sp2 ulysses, 2 patches, warm-up 1" --set parallel.pp=2 --set parallel.sp=2 \
  --set parallel.sp_mode=ulysses
echo
table v_single '*_f[0-9][0-9][0-9].png'

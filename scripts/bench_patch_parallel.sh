#!/usr/bin/env bash
# bench_patch_parallel.sh: xDiT's patch strategies beside sequence
# parallelism at 4 ranks on this machine, on the trained default image model:
# PipeFusion (pp 4, stale keys and values after a warm-up), Ulysses, ring and
# naive patch (sp 4), each against the single process.
#
# What it measures, per layout (configs/shapes-image.json: samples/dit-shapes,
# a 6-layer DiT of 4 heads x 32, 8x8 tokens; 30 images in one batch, CFG,
# 25 DDIM steps, bfloat16 where the CPU has it):
#   bytes/step     what rank 0 sent per denoising step over all its groups
#                  (DITGEN_TEST_COMM_STATS), beside `ditgen plan`'s figure;
#   weights/rank   `ditgen plan`'s per-rank weight memory (PipeFusion: rank 0
#                  holds its stage's layers only);
#   compute s      rank 0's time in the transformer's GEMMs and attention
#                  (DITGEN_PROFILE; median of REPEAT runs), beside the
#                  one-thread single process's: 4 ranks share 2 cores here,
#                  so these are inflated by time-sharing and only roughly say
#                  what share of the work a rank does; not a speed-up;
#   PSNR           of the 30 PNGs against the single process's (median and
#                  minimum, dB; inf = identical bytes): PipeFusion after its
#                  warm-up and naive patch approximate, Ulysses and ring are exact.
#
# Run (from the repo root): scripts/bench_patch_parallel.sh
# Environment: DITGEN (default build/ditgen), PYTHON (default
#   /root/venv-t5/bin/python: numpy and Pillow for the PSNR and the table),
#   CONFIG (default configs/shapes-image.json), STEPS (25), REPEAT (3).
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
DITGEN="${DITGEN:-$REPO/build/ditgen}"
PYTHON="${PYTHON:-/root/venv-t5/bin/python}"
CONFIG="${CONFIG:-$REPO/configs/shapes-image.json}"
STEPS="${STEPS:-25}"
REPEAT="${REPEAT:-3}"
WORK="$(mktemp -d /tmp/bench_patch_parallel.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$REPO"

echo "== machine: $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg); $CONFIG, $STEPS steps"

# run NAME RANKS [--set ...]: REPEAT generations into $WORK/NAME/, their logs
# (NAME.log.1 ...), rank 0's comm stats and the plan.
run() {
  local name=$1 ranks=$2; shift 2
  for i in $(seq "$REPEAT"); do run_once "$name" "$ranks" "$@"; mv "$WORK/$name.log" "$WORK/$name.log.$i"; done
  "$DITGEN" --device cpu plan --config "$CONFIG" --set generate.steps="$STEPS" "$@" >"$WORK/$name.plan" 2>&1
  echo "   $name done"
}

run_once() {
  local name=$1 ranks=$2; shift 2
  # Rank 0 alone profiles, so the log holds one table of times.
  local launcher=(env DITGEN_PROFILE=1)
  if [ "$ranks" -gt 1 ]; then
    launcher=(mpirun --oversubscribe -np "$ranks" -x OMP_NUM_THREADS=1 -x DITGEN_TEST_COMM_STATS
              bash -c '[ "$OMPI_COMM_WORLD_RANK" = 0 ] && export DITGEN_PROFILE=1; exec "$@"' rank)
  fi
  DITGEN_TEST_COMM_STATS="$WORK/$name.comm.json" "${launcher[@]}" "$DITGEN" --config "$CONFIG" \
    --device cpu --threads 1 --set generate.steps="$STEPS" --set output.grid=false \
    --output "$WORK/$name/img.png" "$@" >"$WORK/$name.log" 2>&1 || { echo "$name FAILED:"; tail -20 "$WORK/$name.log"; exit 1; }
}

run single 1
run ulysses 4 --set parallel.sp=4 --set parallel.sp_mode=ulysses
run ring 4 --set parallel.sp=4 --set parallel.sp_mode=ring
run naive_patch 4 --set parallel.sp=4 --set parallel.sp_mode=naive_patch
run pipefusion_w1 4 --set parallel.pp=4 --set parallel.warmup_steps=1
run pipefusion_w1_m8 4 --set parallel.pp=4 --set parallel.patches=8 --set parallel.warmup_steps=1
run pipefusion_w5 4 --set parallel.pp=4 --set parallel.warmup_steps=5
run pipefusion_sync 4 --set parallel.pp=4 --set parallel.warmup_steps="$STEPS"
run pipefusion_sp2 4 --set parallel.pp=2 --set parallel.sp=2 --set parallel.patches=4 --set parallel.warmup_steps=1

echo
echo "== ditgen plan of the PipeFusion run"
cat "$WORK/pipefusion_w1.plan"
echo
"$PYTHON" - "$WORK" "$REPO/scripts/compare_images.py" <<'EOF'
import json, re, statistics, subprocess, sys
from pathlib import Path
work = Path(sys.argv[1])
names = ["single", "ulysses", "ring", "naive_patch", "pipefusion_w1", "pipefusion_w1_m8", "pipefusion_w5",
         "pipefusion_sync", "pipefusion_sp2"]
labels = {"single": "single process", "ulysses": "sp4 ulysses", "ring": "sp4 ring",
          "naive_patch": "sp4 naive_patch", "pipefusion_w1": "pp4, 4 patches, warm-up 1",
          "pipefusion_w1_m8": "pp4, 8 patches, warm-up 1", "pipefusion_w5": "pp4, 4 patches, warm-up 5",
          "pipefusion_sync": "pp4, warm-up = all steps", "pipefusion_sp2": "pp2 x sp2 ulysses, 4 patches, warm-up 1"}
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
for n in names:
    plan = (work / f"{n}.plan").read_text()
    compute = statistics.median(
        secs(log.read_text().replace("\r", "\n"), ["qkv_proj", "out_proj", "mlp_in", "mlp_out", "attention"])
        for log in sorted(work.glob(f"{n}.log.*")))
    if n == "single":
        single_compute = compute
        psnr = "reference"
    else:
        out = subprocess.run([sys.executable, sys.argv[2], str(work / "single"), str(work / n)],
                             capture_output=True, text=True, check=True).stdout
        m = re.search(r"median (\S+) dB, min ([^,\s]+)", out)
        psnr = f"{m.group(1)} / {m.group(2)} dB"
    s = json.loads((work / f"{n}.comm.json").read_text())
    sent = (s["tp"] + s["sp"] + s["cp"] + s.get("pp", 0)) / s["forwards"]
    ratio = f"{compute:.2f} ({compute / single_compute:.2f}x single)"
    print(f"| {labels[n]} | {human(sent)} | {plan_cell(plan, 'comm/step')} | {plan_cell(plan, 'weights/rank')} | {ratio} | {psnr} |")
EOF

#!/usr/bin/env bash
# bench_latte_forward.sh: ditgen vs diffusers on a Latte-1-sized transformer
# with random weights, on this machine, in one run.
#
# What it measures
#   Model: LatteTransformer3DModel with Latte-1's config (28 layers = 28 spatial
#   + 28 temporal blocks, 16 heads x 72 = 1152 wide, patch 2, in 4 / out 8
#   channels, ada_norm_single, gelu-approximate, video_length 16), random
#   weights, float32. EXCEPTION: caption_channels is 40, not 4096, because
#   ditgen had no Latte-capable forward-only bench when this was written
#   (scripts/bench/cpp/forward.cpp loaded DitTransformer only), so ditgen is timed end to end (`ditgen --config`)
#   and the only text encoder at hand is the tiny T5 of tests/fixtures/latte_tiny
#   (d_model 40). The caption projection (caption_channels -> 1152 -> 1152 on a
#   handful of text tokens) is ~0.02% of the forward's FLOPs; both sides use 40.
#   Shapes: 16 frames of 32x32 latents (256x256 frames, VAE factor 8), a CFG
#   batch of 2 -> 2 x 16 x 256 = 8192 tokens through every block.
#
#   diffusers: one LatteTransformer3DModel forward on latents [2, 4, 16, 32, 32],
#     timestep [2], encoder_hidden_states [2, K, 40] (K = the prompt's T5 token
#     count, what LattePipeline / ditgen feed with mask_feature), float32,
#     torch.set_num_threads(THREADS), inference_mode; WARMUP warm-up forwards,
#     then REPEAT timed ones, median. Peak RSS = ru_maxrss of that process
#     (includes from_pretrained loading the weights).
#   ditgen: `ditgen --config` with 1 DDIM step, CFG (guidance 7.5), 16 frames,
#     256x256, one prompt, --threads THREADS, DITGEN_PROFILE=1. Reported: total
#     wall time of the process (load + tokenizer + tiny T5 + 1 CFG transformer
#     forward + tiny VAE decode + writing the output), and the profile's
#     per-op table (the transformer ops dominate; see the raw log). Peak RSS
#     from /usr/bin/time -v. Nothing is subtracted.
#
# The random model directory is made once, outside the repo, in $BENCH_DIR
# (default /root/bench/latte1-random): transformer/ written by diffusers'
# save_pretrained(safe_serialization=True) in float32; model_index.json,
# scheduler/, text_encoder/, tokenizer/, vae/ copied from tests/fixtures/latte_tiny.
#
# Run (from the repo root):
#   scripts/bench/bench_latte_forward.sh
# The Python half runs in the reference Python environment (pinned:
# scripts/requirements.txt):
#   python3 -m venv /root/venv-ditgen && /root/venv-ditgen/bin/pip install -r scripts/requirements.txt
# Environment: PYTHON (default /root/venv-ditgen/bin/python), DITGEN
#   (default build-layers/ditgen), BENCH_DIR, THREADS (2), WARMUP (1), REPEAT (2),
#   PROMPT ("a cat"), SKIP_DIFFUSERS=1 / SKIP_DITGEN=1 to run one side only.
# Expect minutes per forward on a 2-core machine (~17 TFLOP per CFG forward).
set -euo pipefail

REPO="$(cd "$(dirname "$0")/../.." && pwd)"
PYTHON="${PYTHON:-/root/venv-ditgen/bin/python}"
DITGEN="${DITGEN:-$REPO/build-layers/ditgen}"
BENCH_DIR="${BENCH_DIR:-/root/bench/latte1-random}"
THREADS="${THREADS:-2}"
WARMUP="${WARMUP:-1}"
REPEAT="${REPEAT:-2}"
PROMPT="${PROMPT:-a cat}"
WORK="$(dirname "$BENCH_DIR")/latte1-bench-run"
mkdir -p "$WORK"

echo "== machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; uptime: $(uptime)"

# ---------------------------------------------------------------- 1. model dir
if [ ! -f "$BENCH_DIR/transformer/diffusion_pytorch_model.safetensors" ] &&
   [ ! -f "$BENCH_DIR/transformer/diffusion_pytorch_model.safetensors.index.json" ]; then
  echo "== making $BENCH_DIR (random Latte-1-sized transformer)"
  "$PYTHON" "$REPO/scripts/models/make_random_latte.py" "$BENCH_DIR" --layers 28 --heads 16 --head-dim 72 \
    --sample-size 64 --video-length 16
fi

# ------------------------------------------------------------- 2. diffusers
DIFF_OUT="$WORK/diffusers.txt"
if [ "${SKIP_DIFFUSERS:-0}" != 1 ]; then
  echo "== diffusers forward (warmup $WARMUP, repeat $REPEAT, threads $THREADS); load: $(cut -d' ' -f1-3 /proc/loadavg)"
  "$PYTHON" - "$BENCH_DIR" "$THREADS" "$WARMUP" "$REPEAT" "$PROMPT" <<'EOF' | tee "$DIFF_OUT"
import sys, time, resource, statistics, torch
from diffusers import LatteTransformer3DModel
from transformers import T5Tokenizer
d, threads, warmup, repeat, prompt = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
torch.set_num_threads(threads)
k = int(T5Tokenizer.from_pretrained(d + "/tokenizer")(prompt.lower().strip(), return_tensors="pt").attention_mask.sum())
m = LatteTransformer3DModel.from_pretrained(d + "/transformer", torch_dtype=torch.float32).eval()
g = torch.Generator().manual_seed(0)
x = torch.randn(2, 4, 16, 32, 32, generator=g)
ehs = torch.randn(2, k, m.config.caption_channels, generator=g)
t = torch.tensor([999, 999], dtype=torch.int64)
times = []
with torch.inference_mode():
    for i in range(warmup + repeat):
        t0 = time.perf_counter()
        y = m(x, timestep=t, encoder_hidden_states=ehs, enable_temporal_attentions=True, return_dict=False)[0]
        dt = time.perf_counter() - t0
        print(f"forward {i} ({'warmup' if i < warmup else 'timed'}): {dt:.2f} s", flush=True)
        if i >= warmup: times.append(dt)
print(f"text_tokens {k}")
print(f"out_shape {list(y.shape)}")
print(f"forward_seconds {statistics.median(times):.3f}")
print(f"forward_all {','.join(f'{v:.3f}' for v in times)}")
print(f"peak_rss_bytes {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}")
print(f"torch {torch.__version__}")
EOF
fi

# ---------------------------------------------------------------- 3. ditgen
DG_LOG="$WORK/ditgen.log"
DG_TIME="$WORK/ditgen.time"
if [ "${SKIP_DITGEN:-0}" != 1 ]; then
  cat > "$WORK/run.json" <<EOF
{
  "model": { "path": "$BENCH_DIR", "dtype": "float32" },
  "generate": {
    "prompts": ["$PROMPT"], "negative_prompt": "", "frames": 16,
    "height": 256, "width": 256, "seed": 0, "steps": 1,
    "guidance_scale": 7.5, "scheduler": "ddim", "batch_size": 1
  },
  "output": { "path": "$WORK/out.png", "format": "png" }
}
EOF
  echo "== ditgen --config (1 step, CFG, threads $THREADS); load: $(cut -d' ' -f1-3 /proc/loadavg)"
  t0=$(date +%s.%N)
  DITGEN_PROFILE=1 /usr/bin/time -v -o "$DG_TIME" "$DITGEN" --config "$WORK/run.json" \
    --frames 16 --steps 1 --threads "$THREADS" --device cpu >"$DG_LOG" 2>&1 || {
      echo "ditgen FAILED:"; tail -40 "$DG_LOG"; exit 1; }
  t1=$(date +%s.%N)
  echo "ditgen_total_seconds $(echo "$t1 - $t0" | bc)" >> "$DG_LOG"
  tail -60 "$DG_LOG"
fi

# ---------------------------------------------------------------- 4. table
"$PYTHON" - "$DIFF_OUT" "$DG_LOG" "$DG_TIME" <<'EOF'
import sys, os, re
def kv(path):
    r = {}
    if os.path.exists(path):
        for line in open(path):
            p = line.split()
            if len(p) == 2: r[p[0]] = p[1]
    return r
d = kv(sys.argv[1]); g = kv(sys.argv[2])
rss = None
if os.path.exists(sys.argv[3]):
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(sys.argv[3]).read())
    rss = int(m.group(1)) * 1024 if m else None
prof = 0.0
step = None
if os.path.exists(sys.argv[2]):
    m = re.search(r"denoise: step 1/1 ([\d.]+) s/it", open(sys.argv[2]).read())
    step = float(m.group(1)) if m else None
    # sum of the profile's per-op rows (the transformer forward's ops and any others timed)
    for line in open(sys.argv[2]):
        m = re.match(r"\s+(\S+)\s+([\d.]+) s\s+[\d.]+%\s+\d+ calls", line)
        if m: prof += float(m.group(2))
gib = lambda b: f"{int(b)/2**30:.2f} GiB" if b else "-"
dt = float(d["forward_seconds"]) if "forward_seconds" in d else None
gt = float(g["ditgen_total_seconds"]) if "ditgen_total_seconds" in g else None
print()
print(f"{'':44s} {'time (s)':>10s} {'peak RSS':>11s}")
print(f"{'diffusers forward, CFG batch (median)':44s} {dt if dt else float('nan'):10.2f} {gib(d.get('peak_rss_bytes')):>11s}")
print(f"{'ditgen --config 1 step CFG, total wall':44s} {gt if gt else float('nan'):10.2f} {gib(rss):>11s}")
print(f"{'ditgen denoise step (progress line)':44s} {step if step else float('nan'):10.2f} {'':>11s}")
print(f"{'ditgen profiled ops (sum of DITGEN_PROFILE)':44s} {prof:10.2f} {'':>11s}")
if dt and gt:
    print(f"ratio diffusers forward / ditgen total run: {dt/gt:.2f}x")
    if step: print(f"ratio diffusers forward / ditgen denoise step: {dt/step:.2f}x")
if d.get("peak_rss_bytes") and rss:
    print(f"peak RSS ratio diffusers / ditgen: {int(d['peak_rss_bytes'])/rss:.2f}x")
EOF

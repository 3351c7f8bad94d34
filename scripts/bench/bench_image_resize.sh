#!/usr/bin/env bash
# The image-to-video input preprocessing, ditgen against Pillow and
# transformers on the same 1280 x 720 image (a photo-like synthetic one,
# written here): Pillow's Image.resize((832, 480), LANCZOS) and
# CLIPImageProcessor with Wan 2.1 I2V's config, timed with Python's timeit
# as bench_image_resize times ditgen's (median and fastest of 51 single runs
# after a warm-up), ditgen at 1 thread and at every core.
#
#   scripts/bench/bench_image_resize.sh [BUILD_DIR] [PYTHON]
#
# BUILD_DIR (default build) must have been configured with
# -DDITGEN_BENCHMARKS=ON; PYTHON (default /root/venv-wan/bin/python) needs
# Pillow and transformers (scripts/fixtures/requirements-wan.txt).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
python=${2:-/root/venv-wan/bin/python}
cmake --build "$build" --target bench_image_resize -j"$(nproc)" > /dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" - "$work/in.png" <<'PY'
import sys
import numpy as np
from PIL import Image
y, x = np.mgrid[0:720, 0:1280].astype(np.float64)
rng = np.random.default_rng(0)
img = np.stack([127 + 120 * np.sin(x / 97 + y / 61), 255 * y / 719, 127 + 110 * np.cos((x + 2 * y) / 150)], -1)
img += rng.normal(0, 6, img.shape)
Image.fromarray(np.clip(np.round(img), 0, 255).astype(np.uint8)).save(sys.argv[1])
PY
config=tests/fixtures/images/wan_i2v_image_processor/preprocessor_config.json
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p')"
for threads in 1 "$(nproc)"; do
  echo "== ditgen, $threads thread(s)"
  "$build/scripts/bench/cpp/bench_image_resize" --image "$work/in.png" --clip-config "$config" --threads "$threads"
done
# Pillow and transformers timed as bench_image_resize times itself: one
# warm-up, then the median and the fastest of 51 single runs (timeit.repeat).
"$python" - "$work/in.png" "$(dirname "$config")" <<'PY' 2>&1 | grep -v torchvision
import statistics, sys, timeit, warnings
warnings.filterwarnings("ignore")
import PIL
from PIL import Image
from transformers import CLIPImageProcessor
im = Image.open(sys.argv[1]).convert("RGB")
im.load()
proc = CLIPImageProcessor.from_pretrained(sys.argv[2])
for name, stmt in (("pillow_resize", lambda: im.resize((832, 480), Image.Resampling.LANCZOS)),
                   ("transformers_clip", lambda: proc(images=im, return_tensors="np"))):
    stmt()
    ms = [1000 * t for t in timeit.repeat(stmt, number=1, repeat=51)]
    print(f"{name}_ms {statistics.median(ms):.3f}\n{name}_min_ms {min(ms):.3f}")
print(f"(Pillow {PIL.__version__}, {type(proc).__name__})")
PY

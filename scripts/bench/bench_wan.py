#!/usr/bin/env python3
"""Benchmark Wan 2.1 T2V-1.3B's two heavy stages on random weights of the
real sizes (issue 34's benchmark): scripts/bench/bench_video_models.py with
--model wan2.1-1.3b, which says what it measures and how.  One transformer
forward (batch 2 = one CFG step) at 17 frames of 256 x 256 and the Wan VAE
decode of those 17 frames, ditgen against diffusers in float32 and
bfloat16: median seconds and peak RSS.  A benchmark, not a test.

Usage (from the repository root, after building the bench programs; the
Wan-era Python environment, scripts/fixtures/requirements-wan.txt:
python3 -m venv /root/venv-wan && /root/venv-wan/bin/pip install -r
scripts/fixtures/requirements-wan.txt):

    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DDITGEN_BENCHMARKS=ON
    cmake --build build --target bench_forward bench_vae_decode -j
    /root/venv-wan/bin/python scripts/bench/bench_wan.py \\
        [--bench-dir build/scripts/bench/cpp] [--workdir /tmp/ditgen-bench] \\
        [--threads 2] [--repeat 3] [--warmup 1] [--rounds 1] \\
        [--dtypes float32,bfloat16] [--parts transformer,vae] [--small]

The random-weight model is written once to
<workdir>/Wan2.1-T2V-1.3B-random/ (about 5.7 GB), outside the repository.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_video_models  # noqa: E402

if __name__ == "__main__":
    if any(a == "--model" or a.startswith("--model=") for a in sys.argv[1:]):
        sys.exit("bench_wan.py: always Wan 2.1 T2V-1.3B; use bench_video_models.py --model for another model")
    bench_video_models.main(["--model", "wan2.1-1.3b", *sys.argv[1:]])

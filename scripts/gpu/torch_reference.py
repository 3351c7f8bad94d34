#!/usr/bin/env python3
"""The reference for ditgen's CUDA op timings (scripts/gpu/check.sh):
PyTorch on the same GPU and the same shapes as bench_forward's Latte-1
(512x512, 16 frames, CFG batch 2: 32768 tokens) and PixArt-XL 1024 (8192
tokens) forwards. bfloat16 GEMMs through F.linear (cuBLAS) and attention
through F.scaled_dot_product_attention (flash), each the median of 20 after
3 warm-ups, timed with CUDA events.

Usage: python3 scripts/gpu/torch_reference.py (python3: the GPU machine's own
PyTorch with CUDA; elsewhere the reference Python environment,
scripts/requirements.txt:
    python3 -m venv /root/venv-ditgen && /root/venv-ditgen/bin/pip install -r scripts/requirements.txt)
"""
import torch
import torch.nn.functional as F


def t(fn, n=20):
    for _ in range(3): fn()
    torch.cuda.synchronize(); s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(n):
        s.record(); fn(); e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e) / 1e3)
    return sorted(ts)[len(ts) // 2]
bf = torch.bfloat16
for m, k, n in [(32768, 1152, 4608), (32768, 4608, 1152), (32768, 1152, 3456), (8192, 1152, 4608), (8192, 8192, 8192)]:
    a = torch.randn(m, k, device="cuda", dtype=bf); w = torch.randn(n, k, device="cuda", dtype=bf)
    s = t(lambda: F.linear(a, w))
    print(f"torch gemm {m}x{k}x{n}: {s*1e3:.3f} ms, {2*m*k*n/s/1e12:.0f} TFLOP/s")
for name, (b, h, l, d) in {"latte512 spatial": (32, 16, 1024, 72), "latte512 temporal": (2048, 16, 16, 72),
                          "latte256 spatial": (32, 16, 256, 72), "pixart1024 self": (2, 16, 4096, 72)}.items():
    q, k, v = (torch.randn(b, h, l, d, device="cuda", dtype=bf) for _ in range(3))
    s = t(lambda: F.scaled_dot_product_attention(q, k, v))
    print(f"torch sdpa {name} {(b, h, l, d)}: {s*1e3:.3f} ms, {4*b*h*l*l*d/s/1e12:.0f} TFLOP/s")

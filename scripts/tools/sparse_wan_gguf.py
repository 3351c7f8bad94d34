#!/usr/bin/env python3
"""A Wan transformer GGUF of a published config's sizes whose tensor data is
a hole: the header and tensor table as city96's files have them (original
Wan names, general.architecture "wan", the block matrices in the chosen
type, everything else F32 or F16 as the published files keep it), the data
section left sparse (the file's apparent size is the real file's, its disk
use a few KB).  For `ditgen plan`, which reads a file's tensor table only:
the quantized-bytes tables of docs/quantized.md come from such files.
Running a model from one would compute on zeros.

    /root/venv-wan/bin/python scripts/tools/sparse_wan_gguf.py \\
        configs/models/Wan2.1-T2V-14B-Diffusers/transformer/config.json \\
        --type Q8_0 --output /tmp/wan14b-q8_0.gguf

--type: Q8_0, Q4_K_M (v and ffn.2 in Q6_K, as llama-quantize's Q4_K_M
does for Wan), Q4_K, Q6_K.  --kept F32 (city96's Wan 2.1 files, made from
a float32 base) or F16 (the Wan 2.2 A14B files, from a float16 source).
Needs gguf-py (pip install gguf).
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np
import gguf

Q = gguf.GGMLQuantizationType
FILE_TYPES = {"Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0, "Q4_K_M": gguf.LlamaFileType.MOSTLY_Q4_K_M,
              "Q4_K": gguf.LlamaFileType.MOSTLY_Q4_K_S, "Q6_K": gguf.LlamaFileType.MOSTLY_Q6_K}


def tensors(cfg: dict):
    """(name, shape) of a Wan transformer in the original release's names."""
    d = cfg["num_attention_heads"] * cfg["attention_head_dim"]
    ffn, text, freq = cfg["ffn_dim"], cfg["text_dim"], cfg["freq_dim"]
    pt, ph, pw = cfg["patch_size"]
    out = cfg["out_channels"]
    yield "patch_embedding.weight", (d, cfg["in_channels"], pt, ph, pw)
    yield "patch_embedding.bias", (d,)
    for name, shape in (("text_embedding.0", (d, text)), ("text_embedding.2", (d, d)),
                        ("time_embedding.0", (d, freq)), ("time_embedding.2", (d, d)),
                        ("time_projection.1", (6 * d, d)), ("head.head", (out * pt * ph * pw, d))):
        yield name + ".weight", shape
        yield name + ".bias", (shape[0],)
    yield "head.modulation", (1, 2, d)
    for i in range(cfg["num_layers"]):
        b = f"blocks.{i}."
        for attn in ("self_attn", "cross_attn"):
            for p in "qkvo":
                yield f"{b}{attn}.{p}.weight", (d, d)
                yield f"{b}{attn}.{p}.bias", (d,)
            yield f"{b}{attn}.norm_q.weight", (d,)
            yield f"{b}{attn}.norm_k.weight", (d,)
        if cfg.get("cross_attn_norm", True):
            yield b + "norm3.weight", (d,)
            yield b + "norm3.bias", (d,)
        yield b + "ffn.0.weight", (ffn, d)
        yield b + "ffn.0.bias", (ffn,)
        yield b + "ffn.2.weight", (d, ffn)
        yield b + "ffn.2.bias", (d,)
        yield b + "modulation", (1, 6, d)


def quantized_type(name: str, shape, kind: str):
    """llama-quantize's choice (city96's lcpp.patch): 2-D '...weight' inside the blocks."""
    if len(shape) != 2 or not name.endswith("weight") or not name.startswith("blocks."):
        return None
    if kind == "Q4_K_M":
        return Q.Q6_K if name.endswith(".v.weight") or name.endswith("ffn.2.weight") else Q.Q4_K
    return Q[kind]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config")
    ap.add_argument("--type", required=True, choices=["Q8_0", "Q4_K_M", "Q4_K", "Q6_K"])
    ap.add_argument("--kept", default="F32", choices=["F32", "F16"])
    ap.add_argument("--output", required=True)
    a = ap.parse_args()
    with open(a.config) as f:
        cfg = json.load(f)
    w = gguf.GGUFWriter(a.output, "wan")
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_file_type(FILE_TYPES[a.type])
    data = 0
    for name, shape in tensors(cfg):
        q = quantized_type(name, shape, a.type)
        if q is None:
            kept = np.float32 if (a.kept == "F32" or len(shape) == 5) else np.float16
            nbytes = int(np.prod(shape)) * np.dtype(kept).itemsize
            w.add_tensor_info(name, shape, np.dtype(kept), nbytes)
        else:
            block, size = gguf.GGML_QUANT_SIZES[q]
            byte_shape = (*shape[:-1], shape[-1] // block * size)
            nbytes = int(np.prod(byte_shape))
            w.add_tensor_info(name, byte_shape, np.dtype(np.uint8), nbytes, raw_dtype=q)
        data += -(-nbytes // w.data_alignment) * w.data_alignment
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    header = os.path.getsize(a.output)
    start = -(-header // w.data_alignment) * w.data_alignment
    os.truncate(a.output, start + data)
    print(f"{a.output}: {start + data} bytes apparent ({(start + data) / 1e9:.2f} GB), {header} of header")


if __name__ == "__main__":
    main()

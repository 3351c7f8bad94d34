#!/usr/bin/env python3
"""Writes configs/models/<Wan repo>/ (model_index.json and the config.json of every part, no
weights) as the Hugging Face repositories Wan-AI/Wan2.1-T2V-1.3B-Diffusers,
Wan-AI/Wan2.1-T2V-14B-Diffusers, Wan-AI/Wan2.2-T2V-A14B-Diffusers and
Wan-AI/Wan2.2-TI2V-5B-Diffusers publish them, for `ditgen plan` on the real sizes.

The hub is not reachable from here, so each file is rebuilt the way diffusers wrote it:
diffusers' own scripts/convert_wan_to_diffusers.py (the values it passes per model) at the
commit that made the repository's files, plus the defaults of each class's __init__ at that
commit (what save_pretrained writes), serialised as diffusers does
(json.dumps(indent=2, sort_keys=True) + newline, with _class_name and _diffusers_version).
configs/models/README.md lists, file by file, where each value comes from and how it was
checked against what the hub shows (file sizes, line counts, rendered blobs).

Usage (any Python 3.9+; no packages needed; a clone of github.com/huggingface/diffusers):

    python3 scripts/models/write_wan_published_configs.py --diffusers-repo /path/to/diffusers
    python3 scripts/models/write_wan_published_configs.py --diffusers-repo ... --check   # compare, write nothing
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from published_configs import diffusers_config, git_show, main, version

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "configs" / "models"

# diffusers commits: the Wan 2.1 merge (2025-03-02, version 0.33.0.dev0) and the Wan 2.2 merge
# (2025-07-28, version 0.35.0.dev0), whose scripts/convert_wan_to_diffusers.py made the repositories.
WAN21_COMMIT = "2d8a41cae8"
WAN22_COMMIT = "a6d9f6a1a9"

UMT5_XXL = {
    "_name_or_path": "google/umt5-xxl",
    "architectures": ["UMT5EncoderModel"],
    "classifier_dropout": 0.0,
    "d_ff": 10240,
    "d_kv": 64,
    "d_model": 4096,
    "decoder_start_token_id": 0,
    "dense_act_fn": "gelu_new",
    "dropout_rate": 0.1,
    "eos_token_id": 1,
    "feed_forward_proj": "gated-gelu",
    "initializer_factor": 1.0,
    "is_encoder_decoder": True,
    "is_gated_act": True,
    "layer_norm_epsilon": 1e-06,
    "model_type": "umt5",
    "num_decoder_layers": 24,
    "num_heads": 64,
    "num_layers": 24,
    "output_past": True,
    "pad_token_id": 0,
    "relative_attention_max_distance": 128,
    "relative_attention_num_buckets": 32,
    "scalable_attention": True,
    "tie_word_embeddings": False,
    "tokenizer_class": "T5Tokenizer",
    "use_cache": True,
    "vocab_size": 256384,
}


def conversion_configs(repo: Path, commit: str) -> dict:
    """model_type -> diffusers_config from convert_wan_to_diffusers.py's get_transformer_config."""
    src = git_show(repo, commit, "scripts/convert_wan_to_diffusers.py")
    tree = ast.parse(src)
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            t = node.test
            if (isinstance(t.left, ast.Name) and t.left.id == "model_type" and len(t.comparators) == 1
                    and isinstance(t.comparators[0], ast.Constant)):
                for stmt in node.body:
                    if (isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name)
                            and stmt.targets[0].id == "config"):
                        try:
                            out[t.comparators[0].value] = ast.literal_eval(stmt.value)["diffusers_config"]
                        except ValueError:  # e.g. FLF2V's 257 * 2: not one of the models written here
                            pass
    return out


def vae22_config(repo: Path, commit: str) -> dict:
    src = git_show(repo, commit, "scripts/convert_wan_to_diffusers.py")
    for node in ast.parse(src).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id == "vae22_diffusers_config":
            return ast.literal_eval(node.value)
    raise KeyError("vae22_diffusers_config")


def model_index(ver, scheduler, extra=None, transformer_2=False):
    mi = {"_class_name": "WanPipeline", "_diffusers_version": ver,
          "scheduler": ["diffusers", scheduler], "text_encoder": ["transformers", "UMT5EncoderModel"],
          "tokenizer": ["transformers", "T5TokenizerFast"], "transformer": ["diffusers", "WanTransformer3DModel"],
          "vae": ["diffusers", "AutoencoderKLWan"]}
    if extra is not None:
        mi.update(extra)
        mi["transformer_2"] = ["diffusers", "WanTransformer3DModel"] if transformer_2 else [None, None]
    return mi


def build(repo: Path) -> dict:
    files = {}
    tr_path = "src/diffusers/models/transformers/transformer_wan.py"
    vae_path = "src/diffusers/models/autoencoders/autoencoder_kl_wan.py"
    unipc_path = "src/diffusers/schedulers/scheduling_unipc_multistep.py"

    # ---- Wan 2.1 (diffusers 2d8a41cae8, 0.33.0.dev0) ----
    conv21 = conversion_configs(repo, WAN21_COMMIT)
    v21 = version(repo, WAN21_COMMIT)
    unipc21 = diffusers_config(repo, WAN21_COMMIT, unipc_path, "UniPCMultistepScheduler",
                               dict(prediction_type="flow_prediction", use_flow_sigmas=True, num_train_timesteps=1000,
                                    flow_shift=3.0))
    vae21 = diffusers_config(repo, WAN21_COMMIT, vae_path, "AutoencoderKLWan", {})
    te21 = dict(UMT5_XXL, torch_dtype="float32")
    for name, mtype in (("Wan2.1-T2V-1.3B-Diffusers", "Wan-T2V-1.3B"), ("Wan2.1-T2V-14B-Diffusers", "Wan-T2V-14B")):
        files[f"{name}/model_index.json"] = model_index(v21, "UniPCMultistepScheduler")
        files[f"{name}/scheduler/scheduler_config.json"] = unipc21
        files[f"{name}/transformer/config.json"] = diffusers_config(repo, WAN21_COMMIT, tr_path,
                                                                     "WanTransformer3DModel", conv21[mtype])
        files[f"{name}/vae/config.json"] = vae21
        files[f"{name}/text_encoder/config.json"] = te21

    # ---- Wan 2.2 (diffusers a6d9f6a1a9, 0.35.0.dev0) ----
    conv22 = conversion_configs(repo, WAN22_COMMIT)
    v22 = version(repo, WAN22_COMMIT)
    te22 = dict(UMT5_XXL, torch_dtype="bfloat16")
    name = "Wan2.2-T2V-A14B-Diffusers"
    files[f"{name}/model_index.json"] = model_index(v22, "UniPCMultistepScheduler",
                                                    {"boundary_ratio": 0.875, "expand_timesteps": False},
                                                    transformer_2=True)
    files[f"{name}/scheduler/scheduler_config.json"] = diffusers_config(
        repo, WAN22_COMMIT, unipc_path, "UniPCMultistepScheduler",
        dict(prediction_type="flow_prediction", use_flow_sigmas=True, num_train_timesteps=1000, flow_shift=3.0))
    tr = diffusers_config(repo, WAN22_COMMIT, tr_path, "WanTransformer3DModel", conv22["Wan2.2-T2V-A14B"])
    files[f"{name}/transformer/config.json"] = tr
    files[f"{name}/transformer_2/config.json"] = tr
    files[f"{name}/vae/config.json"] = diffusers_config(repo, WAN22_COMMIT, vae_path, "AutoencoderKLWan", {})
    files[f"{name}/text_encoder/config.json"] = te22

    name = "Wan2.2-TI2V-5B-Diffusers"
    files[f"{name}/model_index.json"] = model_index(v22, "UniPCMultistepScheduler",
                                                    {"boundary_ratio": None, "expand_timesteps": True})
    files[f"{name}/scheduler/scheduler_config.json"] = diffusers_config(
        repo, WAN22_COMMIT, unipc_path, "UniPCMultistepScheduler",
        dict(prediction_type="flow_prediction", use_flow_sigmas=True, num_train_timesteps=1000, flow_shift=5.0))
    files[f"{name}/transformer/config.json"] = diffusers_config(repo, WAN22_COMMIT, tr_path, "WanTransformer3DModel",
                                                                conv22["Wan2.2-TI2V-5B"])
    files[f"{name}/vae/config.json"] = diffusers_config(repo, WAN22_COMMIT, vae_path, "AutoencoderKLWan",
                                                        vae22_config(repo, WAN22_COMMIT))
    files[f"{name}/text_encoder/config.json"] = te22
    return files


if __name__ == "__main__":
    sys.exit(main(__doc__, OUT, build))

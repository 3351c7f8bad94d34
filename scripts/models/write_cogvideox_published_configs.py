#!/usr/bin/env python3
"""Writes configs/models/<CogVideoX repo>/ (model_index.json and the config.json of every part, no
weights) as the Hugging Face repositories THUDM/CogVideoX-2b and THUDM/CogVideoX-5b publish them,
for `ditgen plan` on the real sizes.

The hub is not reachable from here, so each file is rebuilt the way diffusers wrote it:
diffusers' own scripts/convert_cogvideox_to_diffusers.py (the values it passes per model) at the
commit that made the repositories' files, plus the defaults of each class's __init__ at that
commit (what save_pretrained writes), serialised as diffusers does
(json.dumps(indent=2, sort_keys=True) + newline, with _class_name and _diffusers_version).
configs/models/README.md says where each value comes from and what was checked against copies
of the hub's files.

The commits (github.com/huggingface/diffusers):
  2dad462d9b (2024-08-07, "Add CogVideoX text-to-video generation model (#9082)", 0.30.0.dev0):
      introduced CogVideoX and the 2b;
  960c149c77 (2024-08-23, "Cogvideox-5B Model adapter change (#9203)", 0.31.0.dev0): the 5b. Its
      conversion script takes --num_layers, --num_attention_heads,
      --use_rotary_positional_embeddings, --scaling_factor and --snr_shift_scale, whose defaults are
      the 2b's and whose comments give the 5b's ("For CogVideoX-2B, num_layers is 30. For 5B, it is
      42"), and sets timestep_spacing "trailing".
Both repositories are written from 960c149c77's script and class signatures: the 2b's published
files carry its keys (use_rotary_positional_embeddings, the VAE's sample_height / sample_width,
"trailing"; 2dad462d9b's script wrote "linspace" and a VAE `sample_size`, which ditgen's VAE reader
refuses), but copies of them say _diffusers_version 0.30.0.dev0, so the 2b's files take the version
of 2dad462d9b.

Usage (any Python 3.9+; no packages needed; a clone of github.com/huggingface/diffusers, a bare
one will do):

    python3 scripts/models/write_cogvideox_published_configs.py --diffusers-repo /path/to/diffusers
    python3 scripts/models/write_cogvideox_published_configs.py --diffusers-repo ... --check   # compare, write nothing
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

from published_configs import diffusers_config, git_show, main, version

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "configs" / "models"

COGVIDEOX_2B_COMMIT = "2dad462d9b"  # introduced CogVideoX-2b: its version string
COGVIDEOX_5B_COMMIT = "960c149c77"  # the 5b: the conversion script and class signatures of both

CONVERT = "scripts/convert_cogvideox_to_diffusers.py"
TRANSFORMER = ("src/diffusers/models/transformers/cogvideox_transformer_3d.py", "CogVideoXTransformer3DModel")
VAE = ("src/diffusers/models/autoencoders/autoencoder_kl_cogvideox.py", "AutoencoderKLCogVideoX")
SCHEDULER = ("src/diffusers/schedulers/scheduling_ddim_cogvideox.py", "CogVideoXDDIMScheduler")

# transformers' (4.x) save_pretrained of T5EncoderModel.from_pretrained("google/t5-v1_1-xxl"): the
# hub config.json (T5ForConditionalGeneration's) with architectures replaced, plus the T5Config
# attributes save_pretrained always writes (classifier_dropout, dense_act_fn, is_gated_act,
# relative_attention_max_distance, use_cache) and torch_dtype; transformers_version is left out
# (not established).
T5_V1_1_XXL = {
    "_name_or_path": "google/t5-v1_1-xxl",
    "architectures": ["T5EncoderModel"],
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
    "model_type": "t5",
    "num_decoder_layers": 24,
    "num_heads": 64,
    "num_layers": 24,
    "output_past": True,
    "pad_token_id": 0,
    "relative_attention_max_distance": 128,
    "relative_attention_num_buckets": 32,
    "tie_word_embeddings": False,
    "use_cache": True,
    "vocab_size": 32128,
}


def conversion_values(repo: Path, commit: str) -> dict:
    """{"2b": {...}, "5b": {...}}: the script's per-model arguments. The 2b's are the argparse
    defaults; each argument's comment ("# For CogVideoX-2B, <arg> is <v>. For 5B, it is <w>") gives
    the 5b's, and must agree with the default for the 2b."""
    src = git_show(repo, commit, CONVERT)
    defaults = {}
    for node in ast.walk(ast.parse(src)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"
                and node.args and isinstance(node.args[0], ast.Constant)):
            kw = {k.arg: k.value for k in node.keywords}
            if "default" in kw:
                defaults[node.args[0].value.lstrip("-")] = ast.literal_eval(kw["default"])
    out = {"2b": {}, "5b": {}}
    for m in re.finditer(r"# For CogVideoX-2B, (\w+) is ([^.\s]+(?:\.\d+)?)\. For 5B, it is (\S+)", src):
        name, v2, v5 = m.group(1), ast.literal_eval(m.group(2)), ast.literal_eval(m.group(3))
        assert defaults[name] == v2, f"{commit}: {name}: default {defaults[name]!r}, comment says 2B {v2!r}"
        out["2b"][name], out["5b"][name] = v2, v5
    expected = {"num_layers", "num_attention_heads", "use_rotary_positional_embeddings", "scaling_factor",
                "snr_shift_scale"}
    assert set(out["2b"]) == expected, f"{commit}: per-model arguments {sorted(out['2b'])}"
    return out


def scheduler_values(repo: Path, commit: str, args: dict) -> dict:
    """The dict the script passes to CogVideoXDDIMScheduler.from_config, args.<x> replaced by args[x]."""
    src = git_show(repo, commit, CONVERT)
    for node in ast.walk(ast.parse(src)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "from_config"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "CogVideoXDDIMScheduler"):
            d = node.args[0]
            out = {}
            for k, v in zip(d.keys, d.values):
                if isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name) and v.value.id == "args":
                    out[k.value] = args[v.attr]
                else:
                    out[k.value] = ast.literal_eval(v)
            return out
    raise KeyError("CogVideoXDDIMScheduler.from_config")


def model_index(ver):
    return {"_class_name": "CogVideoXPipeline", "_diffusers_version": ver,
            "scheduler": ["diffusers", "CogVideoXDDIMScheduler"], "text_encoder": ["transformers", "T5EncoderModel"],
            "tokenizer": ["transformers", "T5Tokenizer"], "transformer": ["diffusers", "CogVideoXTransformer3DModel"],
            "vae": ["diffusers", "AutoencoderKLCogVideoX"]}


def build(repo: Path) -> dict:
    files = {}
    commit = COGVIDEOX_5B_COMMIT
    per_model = conversion_values(repo, commit)
    # The script's pipe.to(float16) for --fp16 (2B) / bfloat16 for --bf16 (5B): "the model must be run in
    # fp16 (2B) or bf16 (5B)"; only the transformers config records it.
    models = (("CogVideoX-2b", "2b", version(repo, COGVIDEOX_2B_COMMIT), "float16"),
              ("CogVideoX-5b", "5b", version(repo, COGVIDEOX_5B_COMMIT), "bfloat16"))
    for name, key, ver, dtype in models:
        a = per_model[key]
        files[f"{name}/model_index.json"] = model_index(ver)
        files[f"{name}/transformer/config.json"] = diffusers_config(
            repo, commit, *TRANSFORMER,
            {k: a[k] for k in ("num_layers", "num_attention_heads", "use_rotary_positional_embeddings")}, ver)
        files[f"{name}/vae/config.json"] = diffusers_config(repo, commit, *VAE, {"scaling_factor": a["scaling_factor"]},
                                                            ver)
        files[f"{name}/scheduler/scheduler_config.json"] = diffusers_config(
            repo, commit, *SCHEDULER, scheduler_values(repo, commit, a), ver)
        files[f"{name}/text_encoder/config.json"] = dict(T5_V1_1_XXL, torch_dtype=dtype)
    return files


if __name__ == "__main__":
    sys.exit(main(__doc__, OUT, build))

#!/usr/bin/env python3
"""Record diffusers' scheduler numbers as JSON fixtures for tests/sched.

Run with the venv that has torch + diffusers (the C++ tests never run Python):
    /work/venv/bin/python scripts/make_sched_fixtures.py

For each scheduler config below, and for each of "ddim" and "dpmpp_2m", the
scheduler is built the way ditgen builds it: the model's own class from
`_class_name`, then `DDIMScheduler.from_config(orig.config)` or
`DPMSolverMultistepScheduler.from_config(orig.config)` (what users do with
`pipe.scheduler = X.from_config(pipe.scheduler.config)`), so keys the target
class does not know are dropped and absent keys take the target's defaults.

Recorded per config and scheduler, for each step count: the timesteps, and the
final sample after running every step on a small 7-element float32 sample with
    model_output[j] = 0.5 * sample[j] + float32(0.1 * step_index + 0.01 * j)
(the 6-step runs also record every intermediate sample). Also the float32
alphas_cumprod (every entry for DiT's config: it is checked bit-exactly) and
DPM's sigmas, which pin down the float32 rounding the C++ code replicates.
"""
import json
import math
import os
import sys

import numpy as np
import torch
import diffusers
from diffusers import DDIMScheduler, DPMSolverMultistepScheduler

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "sched")
STEP_COUNTS = [1, 2, 5, 6, 16, 25, 50]
TRAJECTORY_STEPS = 6
SAMPLE0 = [math.sin(1.7 * (j + 1)) * 1.3 for j in range(7)]

DIT = {
    "_class_name": "DDIMScheduler",
    "_diffusers_version": "0.12.0.dev0",
    "beta_end": 0.02,
    "beta_schedule": "linear",
    "beta_start": 0.0001,
    "clip_sample": False,
    "num_train_timesteps": 1000,
    "set_alpha_to_one": True,
    "steps_offset": 0,
    "trained_betas": None,
}


def sd_like(spacing, **extra):
    cfg = {
        "_class_name": "DDIMScheduler",
        "beta_end": 0.012,
        "beta_schedule": "scaled_linear",
        "beta_start": 0.00085,
        "clip_sample": False,
        "num_train_timesteps": 1000,
        "set_alpha_to_one": False,
        "steps_offset": 1,
        "timestep_spacing": spacing,
    }
    cfg.update(extra)
    return cfg


CONFIGS = {
    # DiT-XL-2-256's scheduler/scheduler_config.json.
    "dit": DIT,
    "scaled_linear_trailing": sd_like("trailing"),
    "scaled_linear_leading": sd_like("leading"),
    "scaled_linear_linspace": sd_like("linspace"),
    "v_prediction_clip": sd_like("trailing", prediction_type="v_prediction", clip_sample=True,
                                 clip_sample_range=1.5, unknown_key_is_ignored=[1, 2]),
    "cosine_sample": {
        "_class_name": "DDIMScheduler",
        "beta_schedule": "squaredcos_cap_v2",
        "num_train_timesteps": 1000,
        "prediction_type": "sample",
        "clip_sample": False,
        "timestep_spacing": "linspace",
        # The cosine schedule's last lambdas are far below -5.1: DPM clips them
        # off (fewer train timesteps to space over); DDIM has no such key.
        "lambda_min_clipped": -5.1,
    },
    # trained_betas wins over beta_schedule; a short train schedule keeps the file small.
    "trained_betas": {
        "_class_name": "DDIMScheduler",
        "num_train_timesteps": 100,
        "trained_betas": [float(x) for x in np.linspace(0.001, 0.1, 100)],
        "beta_schedule": "linear",
        "clip_sample": False,
    },
    # A DPM-solver config: DDIM built from it takes DDIM's defaults
    # (clip_sample True, set_alpha_to_one True), DPM takes the DPM options.
    "dpm_heun_sigma_min": {
        "_class_name": "DPMSolverMultistepScheduler",
        "beta_schedule": "scaled_linear",
        "beta_start": 0.00085,
        "beta_end": 0.012,
        "num_train_timesteps": 1000,
        "solver_type": "heun",
        "final_sigmas_type": "sigma_min",
        "lower_order_final": False,
        "lambda_min_clipped": -5.1,
        "timestep_spacing": "trailing",
        "prediction_type": "v_prediction",
    },
    "dpm_euler_at_final_leading": {
        "_class_name": "DPMSolverMultistepScheduler",
        "num_train_timesteps": 1000,
        "beta_schedule": "linear",
        "final_sigmas_type": "sigma_min",
        "euler_at_final": True,
        "timestep_spacing": "leading",
        "steps_offset": 1,
        "algorithm_type": "deis",
        "solver_type": "bh2",
    },
}


def build(raw, kind):
    orig_cls = getattr(diffusers, raw["_class_name"])
    orig = orig_cls.from_config(raw)
    target_cls = DDIMScheduler if kind == "ddim" else DPMSolverMultistepScheduler
    sched = target_cls.from_config(orig.config)
    # Building straight from the raw dict must agree (absent key -> target
    # default) on every key the target's __init__ takes; diffusers also stores
    # the ignored extras in .config, which is why only known keys are compared.
    direct = target_cls.from_config(raw)
    known = target_cls._get_init_keys(target_cls) - {"self", "kwargs"}
    for k in known:
        assert sched.config[k] == direct.config[k] or (kind, k) in ALIASED, (kind, k, raw)
    return sched


# DPM's __init__ rewrites algorithm_type "deis" -> "dpmsolver++" and solver_type
# "bh2" -> "midpoint" in its config, so the two routes differ in name only.
ALIASED = {("dpmpp_2m", "algorithm_type"), ("dpmpp_2m", "solver_type")}


def model_output(sample, i):
    c = torch.tensor([0.1 * i + 0.01 * j for j in range(sample.numel())], dtype=torch.float32)
    return 0.5 * sample + c


def run(sched, n):
    sched.set_timesteps(n)
    sample = torch.tensor(SAMPLE0, dtype=torch.float32)
    trajectory = []
    for i, t in enumerate(sched.timesteps):
        sample = sched.step(model_output(sample, i), t, sample).prev_sample
        trajectory.append([float(x) for x in sample])
    return [int(t) for t in sched.timesteps], trajectory


def f32list(t):
    return [float(np.float32(x)) for x in t]


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    for name, raw in CONFIGS.items():
        fixture = {
            "generator": "scripts/make_sched_fixtures.py",
            "diffusers_version": diffusers.__version__,
            "torch_version": torch.__version__,
            "scheduler_config": raw,
            "sample0": f32list(torch.tensor(SAMPLE0, dtype=torch.float32)),
            "model_output": "0.5 * sample[j] + float32(0.1 * step_index + 0.01 * j)",
        }
        for kind in ("ddim", "dpmpp_2m"):
            sched = build(raw, kind)
            ac = sched.alphas_cumprod
            entry = {"resolved_config": {k: v for k, v in sched.config.items() if not k.startswith("_")}}
            if name == "dit":
                entry["alphas_cumprod"] = f32list(ac)
            else:
                idx = sorted(set(list(range(0, len(ac), 97)) + [len(ac) - 1]))
                entry["alphas_cumprod_at"] = {str(i): float(ac[i]) for i in idx}
            runs = {}
            for n in STEP_COUNTS:
                timesteps, traj = run(sched, n)
                r = {"timesteps": timesteps, "final": traj[-1]}
                if n == TRAJECTORY_STEPS:
                    r["trajectory"] = traj
                if kind == "dpmpp_2m":
                    r["sigmas"] = f32list(sched.sigmas)
                runs[str(n)] = r
            entry["runs"] = runs
            fixture[kind] = entry
        path = os.path.join(OUT_DIR, name + ".json")
        with open(path, "w") as f:
            # allow_nan: diffusers writes -Infinity (lambda_min_clipped) the same way.
            json.dump(fixture, f, indent=1)
            f.write("\n")
        print("wrote", os.path.relpath(path), file=sys.stderr)


if __name__ == "__main__":
    main()

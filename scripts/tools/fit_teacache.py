#!/usr/bin/env python3
"""Fit TeaCache rescaling coefficients (cache.kind "teacache", cache.coefficients) for a Latte
or DiT diffusers folder, following the TeaCache authors' calibration recipe
(ali-vilab/TeaCache issue #2; docs/step-caches.md#teacache):

  run WITHOUT a cache over many inputs; at every step from the second record
    x = rel-L1 of the TeaCache signal m between consecutive steps,
    y = rel-L1 of the transformer's output between consecutive steps,
  rel-L1(a, prev) = mean|a - prev| / mean|prev|, and fit np.polyfit(x, y, 4)
  (coefficients highest power first, numpy.poly1d order, as ditgen's cache.coefficients).

The signal m is ditgen's (src/pab/step_cache.h, models' teacache_signal):
  * Latte (LatteTransformer3DModel): spatial block 0's modulated attention input,
    norm1(h) * (1 + scale_msa) + shift_msa, shift / scale from
    (transformer_blocks[0].scale_shift_table[None] + timestep_spatial.reshape(B*F, 6, -1)).chunk(6, dim=1);
    h = the hidden state entering block 0 (after pos_embed, layout (B*F, N, D)), timestep_spatial =
    adaln_single's output repeated per frame. Both are taken from block 0's own inputs by a forward
    pre-hook, so nothing of the model is re-implemented.
  * DiT (DiTTransformer2DModel): block 0's AdaLayerNormZero output,
    transformer_blocks[0].norm1(hidden_states, timestep, class_labels, hidden_dtype=...)[0].
y is the transformer's output as it returns it (before CFG; Latte: all out_channels, learned-sigma
channels included). CFG is one batched forward per step; as ditgen decides per OUTPUT (its two CFG
halves together, StepCache units), x and y are computed per output over that output's cond and
uncond rows of the batch (rows o and o + B; for Latte the (B*F) rows b*F .. b*F + F - 1 of batch
entries b = o and b = o + B) as sum|a - prev| / sum|prev|, one (x, y) pair per output per step.

Inputs:
  * latte: captions "a {colour} {shape} {motion}" over ditgen's names (src/eval/shape_classifier.cpp
    shape_colour_names / shape_names, src/eval/motion_measure.cpp motion_names): 180 in all, taken
    in a balanced order (caption j: colour j % 6, shape j % 5, motion (j + j // 30) % 6, a
    permutation of the 180), so the first N of them (--captions N) cover every colour-shape pair
    and every motion about evenly. Caption j, repeat r gets the noise torch.randn((1, C, F, h, w),
    generator=manual_seed(r * N + j)). Each caption is encoded alone (LattePipeline.encode_prompt,
    mask_feature=True: the prompt cut to its k real tokens, the negative "" to the same first k
    rows), which is what ditgen does for every output (the diffusers batch-of-one text); captions
    with the same k are then batched (--batch) through LattePipeline(prompt_embeds=...,
    negative_prompt_embeds=..., latents=...).
  * dit: class ids 0 .. --captions N - 1 (all 30 by default), --seeds S calls
    DiTPipeline(class_labels, generator=manual_seed(s)), s = 0 .. S - 1, in chunks of --batch.
    DiTPipeline hard-codes the null class 1000; the model's null class is num_embeds_ada_norm
    (LabelEmbedding's extra row), so a forward pre-hook remaps 1000 to it (as
    scripts/fixtures/make_step_cache_fixtures.py does).
Run settings default to the repository's configs (configs/default.json: DDIM 25 steps, guidance
5.0, negative "", 16 frames of 32x32; configs/shapes-image.json: DDIM 25 steps, guidance 4.0), the
model folder's own DDIMScheduler. CPU, float32, 2 threads (--threads).

Usage (from anywhere; the environment is the one pinned in scripts/fixtures/requirements-wan.txt:
torch 2.15, diffusers 0.42.1, transformers 5.24, ...):

    python3 -m venv /root/venv-wan && /root/venv-wan/bin/pip install -r scripts/fixtures/requirements-wan.txt
    /root/venv-wan/bin/python scripts/tools/fit_teacache.py --model latte-shapes --captions 60
    /root/venv-wan/bin/python scripts/tools/fit_teacache.py --model dit-shapes --seeds 8
    /root/venv-wan/bin/python scripts/tools/fit_teacache.py --model path/to/folder --report fit.md --dump xy.npz
    /root/venv-wan/bin/python scripts/tools/fit_teacache.py --selfcheck   # signal vs tests/fixtures/step_cache

stdout gets one line, the coefficients as a JSON list for a run config's cache.coefficients
(full float precision); progress and the fit summary (R^2, x range, binned table) go to stderr.
--report PATH writes the summary as markdown; --dump PATH saves the (step, timestep, output, x, y)
samples as .npz. --selfcheck recomputes x on the step-cache parity fixtures' tiny models
(tests/fixtures/step_cache/{latte,dit}_teacache.json, metrics_never_skipping) and exits.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402
import inspect  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
MODELS = {"latte-shapes": REPO / "samples" / "latte-shapes", "dit-shapes": REPO / "samples" / "dit-shapes"}

# ditgen's names (src/eval/shape_classifier.cpp, src/eval/motion_measure.cpp).
COLOURS = ["red", "yellow", "green", "cyan", "blue", "magenta"]
SHAPES = ["circle", "square", "triangle", "star", "cross"]
MOTIONS = ["moving left", "moving right", "moving up", "moving down", "growing", "shrinking"]

# The repository's run configs (configs/default.json, configs/shapes-image.json).
DEFAULTS = {
    "latte": dict(steps=25, guidance=5.0, negative="", frames=16, height=32, width=32, captions=60, seeds=1,
                  batch=30),
    "dit": dict(steps=25, guidance=4.0, captions=30, seeds=8, batch=30),
}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def balanced_captions() -> list[str]:
    """The 180 captions, caption j = colour j % 6, shape j % 5, motion (j + j // 30) % 6."""
    out = []
    for j in range(len(COLOURS) * len(SHAPES) * len(MOTIONS)):
        out.append(f"a {COLOURS[j % 6]} {SHAPES[j % 5]} {MOTIONS[(j + j // 30) % 6]}")
    assert len(set(out)) == 180
    return out


def family_of(folder: Path) -> str:
    cls = json.loads((folder / "model_index.json").read_text())["_class_name"]
    if cls == "LattePipeline":
        return "latte"
    if cls == "DiTPipeline":
        return "dit"
    raise SystemExit(f"{folder}/model_index.json: {cls} (this script fits LattePipeline and DiTPipeline folders)")


# --------------------------------------------------------------------------
# the recorder: block 0's pre-hook gives m, the transformer's forward hook the output
# --------------------------------------------------------------------------


def latte_signal(blk, a: dict) -> torch.Tensor:
    """Spatial block 0 (BasicTransformerBlock, ada_norm_single) modulated attention input."""
    h, timestep = a["hidden_states"], a["timestep"]
    shift_msa, scale_msa = (blk.scale_shift_table[None] + timestep.reshape(h.shape[0], 6, -1)).chunk(6, dim=1)[:2]
    return blk.norm1(h) * (1 + scale_msa) + shift_msa


def dit_signal(blk, a: dict) -> torch.Tensor:
    """Block 0's AdaLayerNormZero output (its first return value)."""
    h = a["hidden_states"]
    return blk.norm1(h, a["timestep"], a["class_labels"], hidden_dtype=h.dtype)[0]


class Recorder:
    """Per transformer call: m from block 0's inputs, y = the call's output. From the second call
    of a pipeline call on, one (x, y) per output: sums over that output's rows of all CFG halves."""

    def __init__(self, transformer, signal_fn):
        self.tr = transformer
        self.blk = transformer.transformer_blocks[0]
        self.signal_fn = signal_fn
        self.sig = inspect.signature(self.blk.forward)
        self.samples: list[tuple] = []  # (step, timestep, output_id, x, y, y_eps)
        self.hooks = []
        self.begin(None, 1)

    def begin(self, output_ids, halves: int):
        self.output_ids = output_ids
        self.halves = halves
        self.step = 0
        self.prev_m = self.prev_y = None
        self.m = self.t = None

    def __enter__(self):
        def tr_pre(module, args, kwargs):
            ts = kwargs.get("timestep", args[1] if len(args) > 1 else None)
            self.t = float(ts.reshape(-1)[0]) if torch.is_tensor(ts) else float(ts)

        def blk_pre(module, args, kwargs):
            bound = self.sig.bind(*args, **kwargs)
            bound.apply_defaults()
            if self.m is not None:
                raise RuntimeError("block 0 ran twice in one transformer call")
            self.m = self.signal_fn(module, bound.arguments).detach().to(torch.float64)

        def tr_post(module, args, kwargs, out):
            y = (out[0] if isinstance(out, tuple) else out.sample).detach().to(torch.float64)
            self.record(self.m, y)
            self.m = None

        self.hooks = [self.tr.register_forward_pre_hook(tr_pre, with_kwargs=True),
                      self.blk.register_forward_pre_hook(blk_pre, with_kwargs=True),
                      self.tr.register_forward_hook(tr_post, with_kwargs=True)]
        return self

    def __exit__(self, *exc):
        for h in self.hooks:
            h.remove()

    def per_output(self, cur: torch.Tensor, prev: torch.Tensor) -> np.ndarray:
        """sum|cur - prev| / sum|prev| per output, over its rows of every CFG half. The batch's
        leading rows are halves x outputs (x frames for Latte), each output's values together."""
        B = len(self.output_ids)
        d = (cur - prev).abs().reshape(self.halves, B, -1).sum(dim=(0, 2))
        b = prev.abs().reshape(self.halves, B, -1).sum(dim=(0, 2))
        return (d / b).numpy()

    def record(self, m: torch.Tensor, y: torch.Tensor):
        if self.prev_m is not None:
            x = self.per_output(m, self.prev_m)
            yy = self.per_output(y, self.prev_y)
            c = self.tr.config.in_channels
            # The eps channels only (what CFG and the sampler use), when the model learns sigma.
            ye = self.per_output(y[:, :c], self.prev_y[:, :c]) if y.shape[1] == 2 * c else yy
            for i, o in enumerate(self.output_ids):
                self.samples.append((self.step, self.t, o, float(x[i]), float(yy[i]), float(ye[i])))
        self.prev_m, self.prev_y = m, y
        self.step += 1


# --------------------------------------------------------------------------
# the runs
# --------------------------------------------------------------------------


def load_pipe(folder, pipeline_class):
    """A float32 pipeline from `folder`; notes a scheduler other than DDIM (the defaults' runs use DDIM)."""
    from diffusers import DDIMScheduler

    pipe = pipeline_class.from_pretrained(str(folder), dtype=torch.float32)
    pipe.set_progress_bar_config(disable=True)
    if not isinstance(pipe.scheduler, DDIMScheduler):
        log(f"note: {folder} scheduler is {type(pipe.scheduler).__name__}, not DDIM")
    return pipe


def latte_pipe(folder):
    from diffusers import LattePipeline

    return load_pipe(folder, LattePipeline)


def dit_pipe(folder):
    from diffusers import DiTPipeline

    return load_pipe(folder, DiTPipeline)


def null_class_remap(tr):
    """DiTPipeline's null class 1000 -> the model's num_embeds_ada_norm (its LabelEmbedding's last row)."""
    null = tr.config.num_embeds_ada_norm

    def remap(module, args, kwargs):
        cl = kwargs.get("class_labels")
        if cl is not None and null != 1000:
            kwargs["class_labels"] = torch.where(cl == 1000, torch.full_like(cl, null), cl)
        return args, kwargs

    return tr.register_forward_pre_hook(remap, with_kwargs=True)


@torch.no_grad()
def run_latte(folder, s, rec_out: list) -> tuple[list, dict]:
    pipe = latte_pipe(folder)
    tr = pipe.transformer
    caps = balanced_captions()[: s.captions]
    C, F = tr.config.in_channels, s.frames
    vae_factor = 2 ** (len(pipe.vae.config.block_out_channels) - 1)
    h, w = s.height // vae_factor, s.width // vae_factor
    items = []  # (output_id, caption, seed, prompt_embeds, negative_embeds)
    for r in range(s.seeds):
        for j, cap in enumerate(caps):
            pe, ne = pipe.encode_prompt(cap, do_classifier_free_guidance=s.guidance > 1, negative_prompt=s.negative,
                                        clean_caption=False, mask_feature=True)
            items.append((len(items), cap, r * len(caps) + j, pe, ne))
    groups: dict[int, list] = {}
    for it in items:
        groups.setdefault(it[3].shape[1], []).append(it)
    rec = Recorder(tr, latte_signal)
    t0 = time.time()
    done = 0
    with rec:
        for k in sorted(groups):
            g = groups[k]
            for a in range(0, len(g), s.batch):
                chunk = g[a: a + s.batch]
                noise = torch.cat([torch.randn((1, C, F, h, w), generator=torch.Generator().manual_seed(it[2]))
                                   for it in chunk])
                rec.begin([it[0] for it in chunk], 2 if s.guidance > 1 else 1)
                pipe(prompt=None, negative_prompt=None, prompt_embeds=torch.cat([it[3] for it in chunk]),
                     negative_prompt_embeds=torch.cat([it[4] for it in chunk]) if s.guidance > 1 else None,
                     num_inference_steps=s.steps, guidance_scale=s.guidance, video_length=F, height=s.height,
                     width=s.width, latents=noise, output_type="latent", clean_caption=False, mask_feature=True)
                assert rec.step == s.steps, (rec.step, s.steps)
                done += len(chunk)
                log(f"  latte: {done}/{len(items)} outputs (k={k}), {time.time() - t0:.0f} s")
    rec_out.extend(rec.samples)
    inputs = dict(captions=len(caps), seeds_per_caption=s.seeds, outputs=len(items),
                  caption_examples=caps[:6], token_groups={int(k): len(v) for k, v in sorted(groups.items())})
    return items, inputs


@torch.no_grad()
def run_dit(folder, s, rec_out: list) -> tuple[list, dict]:
    pipe = dit_pipe(folder)
    tr = pipe.transformer
    n = min(s.captions, tr.config.num_embeds_ada_norm)
    labels = list(range(n))
    remap = null_class_remap(tr)
    rec = Recorder(tr, dit_signal)
    t0 = time.time()
    outputs = 0
    with rec:
        for seed in range(s.seeds):
            for a in range(0, n, s.batch):
                chunk = labels[a: a + s.batch]
                rec.begin([seed * n + c for c in chunk], 2 if s.guidance > 1 else 1)
                pipe(class_labels=chunk, guidance_scale=s.guidance, num_inference_steps=s.steps,
                     generator=torch.Generator().manual_seed(seed * 1000 + a), output_type="pt")
                assert rec.step == s.steps, (rec.step, s.steps)
                outputs += len(chunk)
            log(f"  dit: seed {seed}: {outputs} outputs, {time.time() - t0:.0f} s")
    remap.remove()
    rec_out.extend(rec.samples)
    names = getattr(pipe, "labels", None) or {}
    inv = {v: k for k, v in names.items()}
    return labels, dict(classes=n, seeds=s.seeds, outputs=outputs, class_examples=[inv.get(c, c) for c in labels[:6]])


# --------------------------------------------------------------------------
# the fit and its report
# --------------------------------------------------------------------------


def r_squared(y, p):
    ss_res = float(np.sum((y - p) ** 2))
    ss_tot = float(np.sum((y - np.mean(y)) ** 2))
    return 1.0 - ss_res / ss_tot if ss_tot > 0 else float("nan")


def simulate(coeffs, x_by_output: dict, steps: int, thresholds) -> dict:
    """TeaCache's rule (forced first and last step, skip while acc < threshold) on each output's
    UNCACHED x sequence: the computed steps per output, mean over outputs. Indicative only (a
    cached run's m differs after a skip)."""
    poly = np.poly1d(coeffs)
    out = {}
    for thr in thresholds:
        counts = []
        for xs in x_by_output.values():
            acc, n = 0.0, 0
            for step in range(steps):
                if step == 0 or step == steps - 1:
                    acc, n = 0.0, n + 1
                    continue
                acc += poly(xs[step])
                if acc < thr:
                    continue
                acc, n = 0.0, n + 1
            counts.append(n)
        out[thr] = float(np.mean(counts))
    return out


def fit_and_report(samples, s, inputs, model_name, runtime) -> tuple[list, str]:
    arr = np.array(samples, dtype=np.float64)
    step, tstep, oid, x, y, ye = (arr[:, i] for i in range(6))
    coeffs = np.polyfit(x, y, 4)
    p = np.polyval(coeffs, x)
    r2 = r_squared(y, p)
    r2_lin = r_squared(y, np.polyval(np.polyfit(x, y, 1), x))
    coeffs_eps = np.polyfit(x, ye, 4)
    r2_eps = r_squared(ye, np.polyval(coeffs_eps, x))
    clist = [float(c) for c in coeffs]
    L = []
    L.append(f"### {model_name}\n")
    L.append(f"- folder: `{s.folder}` ({s.family}); {s.steps} DDIM steps, guidance {s.guidance}"
             + (f", negative {json.dumps(s.negative)}, {s.frames} frames of {s.height}x{s.width}"
                if s.family == "latte" else ""))
    L.append(f"- inputs: {json.dumps(inputs)}")
    L.append(f"- samples: {len(x)} (x, y) pairs = outputs x steps 1..{s.steps - 1}; runtime {runtime:.0f} s "
             f"(CPU, {s.threads} threads)")
    L.append(f"- **coefficients** (np.polyfit(x, y, 4), highest power first): `{json.dumps(clist)}`")
    L.append(f"- R^2 = {r2:.6f} (degree-1 fit: {r2_lin:.6f})")
    L.append(f"- x range: [{x.min():.6g}, {x.max():.6g}] (median {np.median(x):.6g}); "
             f"y range: [{y.min():.6g}, {y.max():.6g}]")
    if s.family == "latte":
        L.append(f"- side note, y over the 4 eps channels only (learned-sigma channels dropped): "
                 f"`{json.dumps([float(c) for c in coeffs_eps])}`, R^2 = {r2_eps:.6f}")
    inner = (step >= 1) & (step <= s.steps - 2)
    if inner.any() and inner.sum() > 5:
        c_in = np.polyfit(x[inner], y[inner], 4)
        L.append(f"- side note, the same fit over steps 1..{s.steps - 2} only (without the last step, which the rule "
                 f"always computes): `{json.dumps([float(c) for c in c_in])}`, R^2 = "
                 f"{r_squared(y[inner], np.polyval(c_in, x[inner])):.6f} (the main fit's R^2 on those steps: "
                 f"{r_squared(y[inner], p[inner]):.6f}); x range there [{x[inner].min():.6g}, {x[inner].max():.6g}]")
    L.append("")
    # binned table: quantile bins of x
    edges = np.unique(np.quantile(x, np.linspace(0, 1, s.bins + 1)))
    L.append("x bins (quantiles), means within each bin:\n")
    L.append("| x bin | n | mean x | mean y | poly(mean x) | mean poly(x) |")
    L.append("|---|---|---|---|---|---|")
    idx = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, len(edges) - 2)
    for b in range(len(edges) - 1):
        sel = idx == b
        if not sel.any():
            continue
        L.append(f"| [{edges[b]:.4g}, {edges[b + 1]:.4g}] | {int(sel.sum())} | {x[sel].mean():.5g} | "
                 f"{y[sel].mean():.5g} | {np.polyval(coeffs, x[sel].mean()):.5g} | {p[sel].mean():.5g} |")
    L.append("")
    L.append("per step (means over outputs):\n")
    L.append("| step | timestep | mean x | min x | max x | mean y | mean poly(x) |")
    L.append("|---|---|---|---|---|---|---|")
    for st in range(1, s.steps):
        sel = step == st
        if not sel.any():
            continue
        L.append(f"| {st} | {tstep[sel][0]:.0f} | {x[sel].mean():.5g} | {x[sel].min():.5g} | {x[sel].max():.5g} | "
                 f"{y[sel].mean():.5g} | {p[sel].mean():.5g} |")
    L.append("")
    x_by_output: dict = {}
    for st, o, xv in zip(step.astype(int), oid.astype(int), x):
        x_by_output.setdefault(o, {})[st] = xv
    sim = simulate(coeffs, x_by_output, s.steps, [0.05, 0.1, 0.2, 0.3, 0.5])
    L.append("indicative computed steps (of " + str(s.steps) + ") per output, the rule applied to the uncached x: "
             + ", ".join(f"threshold {t}: {v:.1f}" for t, v in sim.items()))
    L.append("")
    return clist, "\n".join(L)


# --------------------------------------------------------------------------
# --selfcheck: x on the step-cache parity fixtures
# --------------------------------------------------------------------------


@torch.no_grad()
def selfcheck() -> int:
    from safetensors.torch import load_file

    fx = REPO / "tests" / "fixtures"
    bad = 0
    # Latte: latte_tiny, prompt alone, noise row 0 (make_step_cache_fixtures.py's LATTE / latte_call).
    ref = json.loads((fx / "step_cache" / "latte_teacache.json").read_text())
    run = ref["run"]
    pipe = latte_pipe(fx / "latte_tiny")
    noise = load_file(str(fx / "latte_tiny" / "reference" / "noise.safetensors"))["noise"][:1].clone()
    rec = Recorder(pipe.transformer, latte_signal)
    with rec:
        rec.begin([0], 2)
        pipe(prompt=run["prompts"][0], negative_prompt=run["negative_prompt"], num_inference_steps=run["steps"],
             guidance_scale=run["guidance_scale"], video_length=run["frames"], height=run["height"],
             width=run["width"], latents=noise, output_type="latent", clean_caption=False, mask_feature=True)
    bad += compare("latte_tiny", rec.samples, ref["metrics_never_skipping"])
    # DiT: dit_odd, label 1, generator 42 (make_step_cache_fixtures.py's dit_run).
    ref = json.loads((fx / "step_cache" / "dit_teacache.json").read_text())
    run = ref["run"]
    pipe = dit_pipe(fx / "dit_odd")
    h = null_class_remap(pipe.transformer)
    rec = Recorder(pipe.transformer, dit_signal)
    with rec:
        rec.begin([0], 2)
        pipe(class_labels=run["class_labels"], guidance_scale=run["guidance_scale"], num_inference_steps=run["steps"],
             generator=torch.Generator().manual_seed(42), output_type="pt")
    h.remove()
    bad += compare("dit_odd", rec.samples, ref["metrics_never_skipping"])
    log("selfcheck " + ("FAILED" if bad else "passed"))
    return 1 if bad else 0


def compare(name, samples, expected) -> int:
    want = {e["step"]: e["metric"] for e in expected if e["metric"] is not None}
    got = {int(sm[0]): sm[3] for sm in samples}
    worst = max(abs(got[k] - v) / abs(v) for k, v in want.items())
    ok = set(got) == set(want) and worst < 1e-4
    log(f"  {name}: x at steps {sorted(got)} vs the fixture's metrics_never_skipping: max rel diff {worst:.2e} "
        f"({'ok' if ok else 'MISMATCH'})")
    return 0 if ok else 1


# --------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="latte-shapes | dit-shapes | a Latte / DiT diffusers folder")
    ap.add_argument("--captions", type=int, help="latte: the first N balanced captions (default 60, max 180); "
                                                 "dit: class ids 0..N-1 (default 30)")
    ap.add_argument("--seeds", type=int, help="latte: noise seeds per caption (default 1); dit: seeds (default 8)")
    ap.add_argument("--batch", type=int, help="outputs per pipeline call (default 30)")
    ap.add_argument("--steps", type=int)
    ap.add_argument("--guidance", type=float)
    ap.add_argument("--frames", type=int)
    ap.add_argument("--height", type=int)
    ap.add_argument("--width", type=int)
    ap.add_argument("--negative", help="latte: the negative prompt (default \"\")")
    ap.add_argument("--bins", type=int, default=10, help="x bins in the report's table")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--report", help="write the fit summary (markdown) here")
    ap.add_argument("--dump", help="save the samples (step, timestep, output, x, y, y_eps) as .npz here")
    ap.add_argument("--selfcheck", action="store_true", help="check the signals on tests/fixtures/step_cache and exit")
    s = ap.parse_args()
    torch.set_num_threads(s.threads)
    torch.set_default_dtype(torch.float32)
    if s.selfcheck:
        return selfcheck()
    if not s.model:
        ap.error("--model is required")
    s.folder = MODELS.get(s.model, Path(s.model)).resolve()
    s.family = family_of(s.folder)
    for k, v in DEFAULTS[s.family].items():
        if getattr(s, k, None) is None:
            setattr(s, k, v)
    if s.family == "latte" and not 1 <= s.captions <= 180:
        ap.error("--captions: 1..180 for latte")
    model_name = s.model if s.model in MODELS else s.folder.name
    log(f"{model_name}: {s.family}, {s.steps} steps, guidance {s.guidance}, captions {s.captions}, "
        f"seeds {s.seeds}, batch {s.batch}, {s.threads} threads")
    t0 = time.time()
    samples: list = []
    _, inputs = (run_latte if s.family == "latte" else run_dit)(s.folder, s, samples)
    runtime = time.time() - t0
    coeffs, report = fit_and_report(samples, s, inputs, model_name, runtime)
    log(report)
    if s.report:
        Path(s.report).write_text(report + "\n")
    if s.dump:
        np.savez(s.dump, samples=np.array(samples, dtype=np.float64),
                 columns=np.array(["step", "timestep", "output", "x", "y", "y_eps"]), coefficients=np.array(coeffs))
    print(json.dumps(coeffs))
    return 0


if __name__ == "__main__":
    sys.exit(main())

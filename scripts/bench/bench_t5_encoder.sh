#!/usr/bin/env bash
# T5-XXL text-encoder benchmark on the CPU: `ditgen encode` against
# transformers' T5EncoderModel, same machine, same thread count, one prompt of
# exactly 120 real tokens (no padding), bfloat16 weights, float32 activations
# for ditgen (bfloat16 everything for transformers).
#
#   scripts/bench/bench_t5_encoder.sh DITGEN_BINARY WEIGHTS_DIR [THREADS=2]
#
# WEIGHTS_DIR holds the two random full-size T5-XXL encoders written by
#   /root/venv-ditgen/bin/python scripts/models/make_t5_xxl_random.py WEIGHTS_DIR
# (WEIGHTS_DIR/t5xxl-bf16: bfloat16 shards, ~9.5 GB; WEIGHTS_DIR/t5xxl-f32:
# the same weights in float32, ~19 GB; both with the small nfkc test tokenizer).
# DITGEN_BINARY is e.g. build-layers/ditgen; "-" runs the transformers half
# only. PYTHON (default /root/venv-ditgen/bin/python) needs torch, transformers
# 4.x (the sentencepiece T5Tokenizer), safetensors and sentencepiece: the
# reference Python environment, scripts/requirements.txt:
#   python3 -m venv /root/venv-ditgen && /root/venv-ditgen/bin/pip install -r scripts/requirements.txt
#
# What is measured (each run is its own process, under /usr/bin/time -v; before
# every run the model's files are read once with cat > /dev/null, untimed, so
# every run starts from the same page-cache state):
#   ditgen(bf16 file)      ditgen encode --dtype bfloat16 on t5xxl-bf16, 3 runs
#   ditgen(f32 file->bf16) ditgen encode --dtype bfloat16 on t5xxl-f32 (the
#                          float32 checkpoint converted to bfloat16 while
#                          loading), 3 runs
#   transformers bf16      T5EncoderModel.from_pretrained(t5xxl-bf16,
#                          bfloat16), torch.set_num_threads(THREADS): the load,
#                          then 1 warm-up + 3 timed forwards under inference_mode
# Reported per row: the median "encode" seconds, the median process wall
# seconds and the peak RSS. ditgen's encode seconds are the figure it prints
# ("ditgen encode: ... (N s)"): tokenizer + weight loading (mmap, plus the
# float32->bfloat16 conversion for the f32 file) + one forward + writing the
# output. transformers' are the median forward with the weights resident; its
# from_pretrained and first (warm-up) forward are reported apart
# (from_pretrained mmaps the safetensors, so the first forward is what pages
# the weights in). So ditgen's encode seconds compare with transformers'
# load + first forward, and ditgen encode / transformers median forward is an
# upper bound of the pure compute ratio. Process wall seconds compare between
# the ditgen rows (transformers' process also imports torch and runs 4
# forwards); peak RSS (file pages mapped included) compares across all rows.
# Last (untimed), the relative L2 distance of ditgen's embeds_0 to
# transformers' bf16 last_hidden_state (all-bfloat16 compute: ~1.6e-2 on
# these random weights even for an exact float32-activation engine), and to
# transformers run on the same bf16 weights with float32 activations, block
# by block (REF=0 skips it; ~1 min): the tight check, since that is what
# ditgen computes. A warning if ditgen's token ids differ from T5Tokenizer's.
set -euo pipefail

usage="usage: bench_t5_encoder.sh DITGEN_BINARY WEIGHTS_DIR [THREADS=2]"
ditgen=${1:?$usage}
weights=${2:?$usage}
threads=${3:-2}
py=${PYTHON:-/root/venv-ditgen/bin/python}
runs=3
L=120
bf16="$weights/t5xxl-bf16"
f32="$weights/t5xxl-f32"

for d in "$bf16" "$f32"; do
  [ -f "$d/text_encoder/config.json" ] && [ -f "$d/tokenizer/spiece.model" ] ||
    { echo "bench_t5_encoder.sh: $d: no text_encoder/ + tokenizer/ (run scripts/models/make_t5_xxl_random.py $weights)" >&2; exit 2; }
done
if [ "$ditgen" != "-" ]; then
  [ -x "$ditgen" ] || { echo "bench_t5_encoder.sh: $ditgen: not an executable" >&2; exit 2; }
fi
[ -x "$py" ] || { echo "bench_t5_encoder.sh: $py: no python (set PYTHON)" >&2; exit 2; }
if [ ! -x /usr/bin/time ]; then
  echo "bench_t5_encoder.sh: installing GNU time (apt-get install time)" >&2
  sudo_=""; [ "$(id -u)" -eq 0 ] || sudo_=sudo
  $sudo_ apt-get install -y -qq time >/dev/null || $sudo_ sh -c 'apt-get update -qq && apt-get install -y -qq time' >/dev/null
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench_t5_encoder.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

cat > "$tmp/t5bench.py" <<'PYEOF'
import json, math, os, resource, statistics, sys, time

L = 120


def tokenizer(model_dir):
    from transformers import T5Tokenizer
    return T5Tokenizer.from_pretrained(os.path.join(model_dir, "tokenizer"))


def n_tokens(tok, text):
    # What ditgen and diffusers' PixArt/Latte pipelines feed the tokenizer: lower().strip().
    return len(tok(text.lower().strip(), add_special_tokens=True).input_ids)


def make_prompt(model_dir):
    """A lower-case prompt of exactly L tokens (</s> included) under this tokenizer, untruncated."""
    tok = tokenizer(model_dir)
    base = ("a small red fox runs across a snowy field at sunrise, soft golden light, mist over the "
            "pine trees, a wooden cabin with smoke rising from the chimney, highly detailed photograph").split()
    words, i = [], 0
    while n_tokens(tok, " ".join(words)) < L:
        words.append(base[i % len(base)])
        i += 1
    while n_tokens(tok, " ".join(words)) > L:
        words.pop()
    fillers = sorted(set(base) | {"a", "of", "the"})
    while n_tokens(tok, " ".join(words)) < L:
        n = n_tokens(tok, " ".join(words))
        fits = [(n_tokens(tok, " ".join(words + [w])), w) for w in fillers]
        fits = [(k, w) for k, w in fits if n < k <= L]
        if not fits:
            sys.exit("bench_t5_encoder.sh: cannot build a prompt of exactly %d tokens" % L)
        words.append(max(fits)[1])
    text = " ".join(words)
    assert n_tokens(tok, text) == L and text == text.lower().strip()
    return text


def hf(model_dir, prompt_file, threads, out_file, result_file):
    import torch
    import transformers
    from safetensors.torch import save_file
    from transformers import T5EncoderModel

    transformers.utils.logging.disable_progress_bar()
    torch.set_num_threads(threads)
    prompt = open(prompt_file, encoding="utf-8").read()
    tok = tokenizer(model_dir)
    enc = tok([prompt.lower().strip()], padding="max_length", max_length=L, truncation=True,
              add_special_tokens=True, return_tensors="pt")
    assert int(enc.attention_mask.sum()) == L, "prompt is not %d real tokens" % L
    t0 = time.perf_counter()
    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    kw = {"dtype" if (major, minor) >= (4, 56) else "torch_dtype": torch.bfloat16}
    model = T5EncoderModel.from_pretrained(os.path.join(model_dir, "text_encoder"), **kw).eval()
    load_s = time.perf_counter() - t0
    assert next(model.parameters()).dtype == torch.bfloat16
    times = []
    with torch.inference_mode():
        for k in range(4):  # 1 warm-up + 3 timed
            t0 = time.perf_counter()
            out = model(input_ids=enc.input_ids, attention_mask=enc.attention_mask).last_hidden_state
            times.append(time.perf_counter() - t0)
    first_s, times = times[0], times[1:]
    out = out[0].float().contiguous()
    if not torch.isfinite(out).all():
        sys.exit("bench_t5_encoder.sh: transformers' output is not finite")
    save_file({"ids": enc.input_ids[0].contiguous(), "mask": enc.attention_mask[0].contiguous(), "embeds": out},
              out_file)
    res = {"load_s": load_s, "first_forward_s": first_s, "forward_s": times, "median_forward_s": statistics.median(times),
           "maxrss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
           "torch": torch.__version__, "transformers": transformers.__version__, "threads": torch.get_num_threads()}
    json.dump(res, open(result_file, "w"))
    print("transformers: load %.2f s, warm-up forward %.3f s, forwards %s s (median %.3f s), ru_maxrss %.2f GB,"
          " out std %.4g" % (load_s, first_s, ", ".join("%.3f" % t for t in times), res["median_forward_s"],
                             res["maxrss_bytes"] / 1e9, out.std().item()), flush=True)


def ref(model_dir, prompt_file, threads, out_file):
    """transformers' encoder on the stored bfloat16 weights with float32 activations (what ditgen computes
    with --dtype bfloat16 on the CPU): each block is widened to float32 just for its own forward, so memory
    stays at the bfloat16 model (mmapped) + one float32 block."""
    import torch
    import transformers
    from safetensors.torch import save_file
    from transformers import T5EncoderModel

    transformers.utils.logging.disable_progress_bar()
    torch.set_num_threads(threads)
    prompt = open(prompt_file, encoding="utf-8").read()
    enc = tokenizer(model_dir)([prompt.lower().strip()], padding="max_length", max_length=L, truncation=True,
                               add_special_tokens=True, return_tensors="pt")
    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    kw = {"dtype" if (major, minor) >= (4, 56) else "torch_dtype": torch.bfloat16}
    model = T5EncoderModel.from_pretrained(os.path.join(model_dir, "text_encoder"), **kw).eval()

    def widen(mod, args, kwargs):
        mod._bf16 = [(p, p.data) for p in mod.parameters()]
        for p, data in mod._bf16:
            p.data = data.float()
        cast = lambda v: v.float() if torch.is_tensor(v) and v.is_floating_point() else v
        return tuple(cast(a) for a in args), {k: cast(v) for k, v in kwargs.items()}

    def restore(mod, args, kwargs, out):
        for p, data in mod._bf16:
            p.data = data
        del mod._bf16

    for block in model.encoder.block:
        block.register_forward_pre_hook(widen, with_kwargs=True)
        block.register_forward_hook(restore, with_kwargs=True)
    model.encoder.final_layer_norm.float()
    t0 = time.perf_counter()
    with torch.inference_mode():
        out = model(input_ids=enc.input_ids, attention_mask=enc.attention_mask).last_hidden_state
    assert out.dtype == torch.float32
    save_file({"ids": enc.input_ids[0].contiguous(), "mask": enc.attention_mask[0].contiguous(),
               "embeds": out[0].contiguous()}, out_file)
    print("reference (bf16 weights, float32 activations): %.1f s, ru_maxrss %.2f GB"
          % (time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6), flush=True)


def rel_l2(ditgen_file, hf_file):
    import torch
    from safetensors.torch import load_file
    d, h = load_file(ditgen_file), load_file(hf_file)
    if not torch.equal(d["ids_0"], h["ids"]) or not torch.equal(d["mask_0"], h["mask"]):
        print("WARNING: ditgen's ids/mask differ from transformers' tokenizer")
    return rel_l2_tensors(d["embeds_0"], h["embeds"])


def rel_l2_tensors(a, b):
    import torch
    a, b = a.double(), b.double()
    assert a.shape == b.shape, (a.shape, b.shape)
    if not torch.isfinite(a).all():
        return float("nan"), float("nan")
    return ((a - b).norm() / b.norm()).item(), (a - b).abs().max().item()


def report(rows_file, hf_file, tmp):
    rows = [l.split("\t") for l in open(rows_file).read().splitlines() if l.strip()]
    hfr = json.load(open(hf_file)) if os.path.exists(hf_file) else None
    table = []  # label, encode s, wall s, rss bytes
    for label in ("ditgen(bf16 file)", "ditgen(f32 file->bf16)"):
        r = [x for x in rows if x[0] == label]
        if r:
            table.append((label, statistics.median(float(x[1]) for x in r), statistics.median(float(x[2]) for x in r),
                          max(int(x[3]) * 1024 for x in r)))
    hf_wall = [x for x in rows if x[0] == "transformers bf16"]
    if hfr:
        table.append(("transformers bf16", hfr["median_forward_s"], float(hf_wall[0][2]) if hf_wall else float("nan"),
                      max(hfr["maxrss_bytes"], int(hf_wall[0][3]) * 1024 if hf_wall else 0)))
    print()
    print("%-24s %18s %16s %13s" % ("", "median encode s", "median wall s", "peak RSS GB"))
    for label, enc_s, wall_s, rss in table:
        print("%-24s %18.3f %16.2f %13.2f" % (label, enc_s, wall_s, rss / 1e9))
    if hfr:
        fwd, both = hfr["median_forward_s"], hfr["load_s"] + hfr["first_forward_s"]
        print("transformers: from_pretrained %.2f s (safetensors mmapped: the weights are faulted in by the first"
              " forward), first forward %.2f s, median of 3 later forwards %.3f s; load + first forward %.2f s"
              % (hfr["load_s"], hfr["first_forward_s"], fwd, both))
        for label, enc_s, wall_s, _ in table[:-1]:
            print("%s / transformers: encode / median forward %.2fx (upper bound: ditgen's includes its load),"
                  " encode / (load + first forward) %.2fx" % (label, enc_s / fwd, enc_s / both))
    print("Which numbers compare: ditgen's encode s = tokenizer + weight load (mmap; + the f32->bf16 conversion for"
          " the f32 file) + ONE forward + output write, as ditgen prints it; transformers' encode s = the median"
          " forward with the weights already resident (load apart). So ditgen encode s <-> transformers load +"
          " first forward (like for like: one encode in a fresh process); ditgen encode s / transformers median"
          " forward is an upper bound of ditgen's pure compute ratio. Process wall s also counts interpreter and"
          " library start-up and, for transformers, 4 forwards: compare it between the ditgen rows only. Peak RSS"
          " (mapped file pages included) compares across all rows.")
    hf_out, ref_out = os.path.join(tmp, "hf.safetensors"), os.path.join(tmp, "ref.safetensors")
    for name, variant in (("ditgen(bf16 file)", "bf16"), ("ditgen(f32 file->bf16)", "f32")):
        f = os.path.join(tmp, "ditgen_%s_1.safetensors" % variant)
        if hfr and os.path.exists(f):
            r, m = rel_l2(f, hf_out)
            print("relL2 %s embeds_0 vs transformers bf16 last_hidden_state: %.3e (max |diff| %.3e)" % (name, r, m))
        if os.path.exists(f) and os.path.exists(ref_out):
            r, m = rel_l2(f, ref_out)
            print("relL2 %s embeds_0 vs transformers bf16 weights + f32 activations: %.3e (max |diff| %.3e)"
                  % (name, r, m))
    if hfr and os.path.exists(ref_out):
        from safetensors.torch import load_file
        h = load_file(hf_out)
        r, m = rel_l2_tensors(h["embeds"], load_file(ref_out)["embeds"])
        print("relL2 transformers bf16 vs transformers bf16 weights + f32 activations: %.3e (max |diff| %.3e):"
              " the bfloat16-activation error alone, the scale for the first relL2 above" % (r, m))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "prompt":
        print(make_prompt(sys.argv[2]), end="")
    elif cmd == "count":
        print(n_tokens(tokenizer(sys.argv[2]), open(sys.argv[3], encoding="utf-8").read()))
    elif cmd == "hf":
        hf(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6])
    elif cmd == "ref":
        ref(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
    elif cmd == "report":
        report(sys.argv[2], sys.argv[3], sys.argv[4])
PYEOF

export PYTHONWARNINGS=ignore TRANSFORMERS_VERBOSITY=error TOKENIZERS_PARALLELISM=false

# Time-v fields of one run: wall seconds, max RSS in KiB.
time_fields() {
  awk -F': ' '/Elapsed \(wall clock\)/ { n = split($NF, a, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + a[i] }
              /Maximum resident set size/ { m = $NF }
              END { printf "%.2f\t%d\n", s, m }' "$1"
}
warm() {  # read the model's weights once so each run starts from the same page-cache state
  cat "$1"/text_encoder/*.safetensors > /dev/null
}

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo); threads $threads;" \
     "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
"$py" "$tmp/t5bench.py" prompt "$bf16" > "$tmp/prompt.txt"
prompt=$(cat "$tmp/prompt.txt")
echo "prompt ($("$py" "$tmp/t5bench.py" count "$bf16" "$tmp/prompt.txt") tokens with </s>, max_length $L): $prompt"
: > "$tmp/rows.tsv"

if [ "$ditgen" != "-" ]; then
  for variant in bf16 f32; do
    dir=$bf16; label="ditgen(bf16 file)"
    [ "$variant" = f32 ] && { dir=$f32; label="ditgen(f32 file->bf16)"; }
    for r in $(seq 1 $runs); do
      warm "$dir"
      out="$tmp/ditgen_${variant}_$r.safetensors"
      /usr/bin/time -v -o "$tmp/time.txt" "$ditgen" encode --model "$dir" --prompt "$prompt" --output "$out" \
        --max-sequence-length "$L" --dtype bfloat16 --threads "$threads" --device cpu 2> "$tmp/stderr.txt" ||
        { cat "$tmp/stderr.txt" "$tmp/time.txt" >&2; echo "bench_t5_encoder.sh: ditgen encode failed" >&2; exit 1; }
      line=$(grep -E '^ditgen encode: ' "$tmp/stderr.txt" | tail -1)
      enc_s=$(sed -nE 's/.*\(([0-9.]+) s\)$/\1/p' <<< "$line")
      [ -n "$enc_s" ] || { cat "$tmp/stderr.txt" >&2; echo "bench_t5_encoder.sh: no 'ditgen encode: ... (N s)' line" >&2; exit 1; }
      IFS=$'\t' read -r wall_s rss_kb <<< "$(time_fields "$tmp/time.txt")"
      echo "$label run $r: encode $enc_s s, wall $wall_s s, max RSS $(awk -v k="$rss_kb" 'BEGIN {printf "%.2f", k * 1024 / 1e9}') GB  [$line]"
      printf '%s\t%s\t%s\t%s\n' "$label" "$enc_s" "$wall_s" "$rss_kb" >> "$tmp/rows.tsv"
    done
  done
  # ditgen's process start + tokenizer alone (no weights), for reading the encode seconds above.
  /usr/bin/time -v -o "$tmp/time.txt" "$ditgen" encode --model "$bf16" --prompt "$prompt" --output "$tmp/ids.safetensors" \
    --max-sequence-length "$L" --ids-only --device cpu 2> "$tmp/stderr.txt" &&
    echo "ditgen encode --ids-only (no weights): wall $(time_fields "$tmp/time.txt" | cut -f1) s" ||
    echo "ditgen encode --ids-only failed (ignored)"
fi

warm "$bf16"
/usr/bin/time -v -o "$tmp/time.txt" "$py" "$tmp/t5bench.py" hf "$bf16" "$tmp/prompt.txt" "$threads" \
  "$tmp/hf.safetensors" "$tmp/hf.json"
IFS=$'\t' read -r wall_s rss_kb <<< "$(time_fields "$tmp/time.txt")"
echo "transformers process: wall $wall_s s, max RSS $(awk -v k="$rss_kb" 'BEGIN {printf "%.2f", k * 1024 / 1e9}') GB"
printf '%s\t%s\t%s\t%s\n' "transformers bf16" "-" "$wall_s" "$rss_kb" >> "$tmp/rows.tsv"

if [ "${REF:-1}" != 0 ]; then  # untimed: the float32-activation reference for the relL2 check (REF=0 skips it)
  "$py" "$tmp/t5bench.py" ref "$bf16" "$tmp/prompt.txt" "$threads" "$tmp/ref.safetensors"
fi

"$py" "$tmp/t5bench.py" report "$tmp/rows.tsv" "$tmp/hf.json" "$tmp"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

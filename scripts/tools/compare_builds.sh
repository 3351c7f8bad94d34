#!/usr/bin/env bash
# Byte-for-byte comparison of two ditgen builds on the shipped default
# models (image and video), the parity fixtures (from diffusers' noise, DDIM
# and DPM-Solver++ 2M; DiT, PixArt, Latte; Wan with UniPC and Euler and its
# two-expert 2.2 form; CogVideoX with sin-cos and with rotary positions)
# and parallel layouts under mpirun: every output file (PNGs with their
# metadata, --save-latents) of OLD must equal NEW's. For refactors that must not change a bit (e.g. an
# old checkout built in /tmp/old/build).
#   scripts/tools/compare_builds.sh [--pixels] OLD_DITGEN NEW_DITGEN
# --pixels: a PNG whose bytes differ counts as the same when its pixels
# (the decompressed IDAT data) are equal, and the line names the text keys
# that differ: for builds whose PNG metadata differs on purpose.
# A batch manifest (*_manifest.jsonl) is compared without its "seconds".
# Prints one line per case and exits non-zero if any file differs.
set -u
pixels=0
[ "${1:-}" = --pixels ] && pixels=1 && shift
old=$1 new=$2
cd "$(dirname "$0")/../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0

# png_pixels_equal A B: prints the PNG text keys whose values differ and
# exits 0 when the two files' pixels are equal (Python's standard library
# only: zlib over the concatenated IDAT chunks).
png_pixels_equal() {
  python3 - "$1" "$2" <<'PY'
import struct, sys, zlib
def chunks(path):
    data = open(path, "rb").read()
    pos, idat, text = 8, b"", {}
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IDAT": idat += body
        elif kind in (b"tEXt", b"iTXt"): key, _, val = body.partition(b"\0"); text[key] = val
        elif kind == b"IHDR": text[b"IHDR"] = body
        pos += 12 + n
    return zlib.decompress(idat), text
(pa, ta), (pb, tb) = chunks(sys.argv[1]), chunks(sys.argv[2])
print(",".join(sorted(k.decode() for k in ta.keys() | tb.keys() if ta.get(k) != tb.get(k))))
sys.exit(0 if pa == pb and ta.get(b"IHDR") == tb.get(b"IHDR") else 1)
PY
}

# run NAME RANKS ARGS...: both builds write into the same path (the PNG
# metadata holds the effective config, output path included), then compare.
run() {
  local name=$1 ranks=$2
  shift 2
  for which in old new; do
    local exe=$old
    [ "$which" = new ] && exe=$new
    local launch=()
    [ "$ranks" -gt 1 ] && launch=(mpirun --oversubscribe -np "$ranks" -x OMP_NUM_THREADS=1)
    rm -rf "$work/run" && mkdir -p "$work/run"
    if ! "${launch[@]}" "$exe" --device cpu "$@" --output "$work/run/out.png" --quiet >"$work/log" 2>&1; then
      echo "FAIL  $name ($which build):" && cat "$work/log" && status=1 && return
    fi
    rm -rf "$work/$which" && mv "$work/run" "$work/$which"
  done
  local same=0 total=0 pixel_same=0 keys="" differing=""
  for f in $(cd "$work/old" && find . -type f | sort); do
    total=$((total + 1))
    if cmp -s "$work/old/$f" "$work/new/$f"; then
      same=$((same + 1))
    elif [ "${f%_manifest.jsonl}" != "$f" ] &&  # a batch manifest: its "seconds" are a clock reading
      cmp -s <(sed -E 's/"seconds":[0-9.e+-]+//g' "$work/old/$f") <(sed -E 's/"seconds":[0-9.e+-]+//g' "$work/new/$f"); then
      same=$((same + 1))
    elif [ "$pixels" = 1 ] && [ "${f##*.}" = png ] && [ -f "$work/new/$f" ] &&
      keys=$(png_pixels_equal "$work/old/$f" "$work/new/$f"); then
      pixel_same=$((pixel_same + 1))
    else
      differing="$differing ${f#./}"
    fi
  done
  local ok=$((same + pixel_same))
  [ "$ok" -eq "$total" ] || status=1
  printf '%-5s %-50s %d of %d files identical' "$([ "$ok" -eq "$total" ] && echo ok || echo DIFF)" "$name" "$same" "$total"
  [ "$pixel_same" -gt 0 ] && printf ', %d more with equal pixels (PNG text differs: %s)' "$pixel_same" "$keys"
  [ -n "$differing" ] && printf '; differ:%s' "$differing"
  printf '\n'
}

# The shipped defaults, their model paths given from here (a config's own
# relative paths resolve against its folder in newer builds, the cwd in older).
run "shapes image model (30 classes + grid)" 1 --config configs/shapes-image.json --set output.grid=true \
  --set model.path=samples/dit-shapes
python3 -c 'import json,sys; c=json.load(open("configs/default.json")); c["output"]={"path":"x.png","format":"png"}; json.dump(c,open(sys.argv[1],"w"))' "$work/video.json"
run "shapes video model (6 prompts, PNG frames)" 1 --config "$work/video.json" --set model.path=samples/latte-shapes
for fx in dit_odd dit_small_bf16; do
  for s in ddim dpm; do
    run "$fx $s" 1 --config tests/fixtures/$fx/reference/run_$s.json --set model.path=tests/fixtures/$fx \
      --init-noise tests/fixtures/$fx/reference/noise.safetensors --save-latents "$work/run/latents.safetensors"
  done
done
for s in ddim dpm; do
  run "pixart_tiny $s" 1 --config tests/fixtures/pixart_tiny/reference/run_$s.json --set model.path=tests/fixtures/pixart_tiny \
    --init-noise tests/fixtures/pixart_tiny/reference/noise.safetensors --save-latents "$work/run/latents.safetensors"
done
latte=(--config tests/fixtures/latte_tiny/reference/run_ddim.json --set model.path=tests/fixtures/latte_tiny
       --init-noise tests/fixtures/latte_tiny/reference/noise.safetensors --save-latents "$work/run/latents.safetensors"
       --threads 1)
run "latte_tiny ddim" 1 "${latte[@]}"
run "latte_tiny sp2 dsp" 2 "${latte[@]}" --set parallel.sp=2 --set parallel.sp_mode=dsp
run "latte_tiny tp2 x cp2" 4 "${latte[@]}" --set parallel.tp=2 --set parallel.cp=2
run "latte_tiny pp2 PipeFusion" 2 "${latte[@]}" --set parallel.pp=2
fixture=(--config tests/fixtures/dit_odd/reference/run_ddim.json --set model.path=tests/fixtures/dit_odd
         --init-noise tests/fixtures/dit_odd/reference/noise.safetensors --save-latents "$work/run/latents.safetensors"
         --threads 1)
run "dit_odd cp2" 2 "${fixture[@]}" --set parallel.cp=2
run "dit_odd sp2 ring" 2 "${fixture[@]}" --set parallel.sp=2 --set parallel.sp_mode=ring
run "dit_odd sp3 ulysses (uneven shards)" 3 "${fixture[@]}" --set parallel.sp=3
run "dit_odd tp3" 3 "${fixture[@]}" --set parallel.tp=3
run "dit_odd tp2 x sp2" 4 "${fixture[@]}" --set parallel.tp=2 --set parallel.sp=2
run "dit_odd sp2 x cp2 x tp2 ring" 8 "${fixture[@]}" --set parallel.sp=2 --set parallel.cp=2 --set parallel.tp=2 \
  --set parallel.sp_mode=ring
# Wan (UMT5, its transformer, its causal VAE) and CogVideoX (T5, the joint
# text + video sequence, its causal VAE), alone and under the layouts that
# shard their one sequence.
for s in unipc euler; do
  run "wan_tiny $s" 1 --config tests/fixtures/wan_tiny/reference/run_$s.json --set model.path=tests/fixtures/wan_tiny \
    --init-noise tests/fixtures/wan_tiny/reference/noise.safetensors --save-latents "$work/run/latents.safetensors"
done
run "wan22_tiny unipc (two experts)" 1 --config tests/fixtures/wan22_tiny/reference/run_unipc.json \
  --set model.path=tests/fixtures/wan22_tiny --init-noise tests/fixtures/wan22_tiny/reference/noise.safetensors \
  --save-latents "$work/run/latents.safetensors"
wan=(--config tests/fixtures/wan_tiny/reference/run_unipc.json --set model.path=tests/fixtures/wan_tiny
     --init-noise tests/fixtures/wan_tiny/reference/noise.safetensors --save-latents "$work/run/latents.safetensors"
     --threads 1)
run "wan_tiny sp2 ring" 2 "${wan[@]}" --set parallel.sp=2 --set parallel.sp_mode=ring
run "wan_tiny pp2 PipeFusion" 2 "${wan[@]}" --set parallel.pp=2 --set parallel.warmup_steps=1
# CogVideoX-5b's form (rotary positions): the fixture with its rotary transformer.
rope="$work/cogvideox_rope"
cp -rL tests/fixtures/cogvideox_tiny "$rope" && rm -rf "$rope/transformer" &&
  cp -r tests/fixtures/cogvideox_tiny/reference/transformer_rope "$rope/transformer"
for model in tests/fixtures/cogvideox_tiny "$rope"; do
  name=cogvideox_tiny
  [ "$model" = "$rope" ] && name="cogvideox_tiny rotary"
  cog=(--config tests/fixtures/cogvideox_tiny/reference/run.json --set model.path="$model"
       --init-noise tests/fixtures/cogvideox_tiny/reference/noise.safetensors --save-latents "$work/run/latents.safetensors"
       --threads 1)
  run "$name" 1 "${cog[@]}"
  run "$name sp4 ring (text rows on two ranks)" 4 "${cog[@]}" --set parallel.sp=4 --set parallel.sp_mode=ring
  run "$name tp2 x cp2" 4 "${cog[@]}" --set parallel.tp=2 --set parallel.cp=2
  run "$name pp2 PipeFusion" 2 "${cog[@]}" --set parallel.pp=2 --set parallel.warmup_steps=1
done
exit $status

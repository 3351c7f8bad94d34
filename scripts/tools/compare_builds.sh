#!/usr/bin/env bash
# Byte-for-byte comparison of two ditgen builds on the shipped default model,
# the parity fixtures (from diffusers' noise, DDIM and DPM-Solver++ 2M) and
# parallel layouts under mpirun: every output file (PNGs with their
# metadata, --save-latents) of OLD must equal NEW's. For refactors that must
# not change a bit (e.g. an old checkout built in /tmp/old/build).
#   scripts/tools/compare_builds.sh OLD_DITGEN NEW_DITGEN
# Prints one line per case and exits non-zero if any file differs.
set -u
old=$1 new=$2
cd "$(dirname "$0")/../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0

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
  local same=0 total=0
  for f in "$work"/old/*; do
    total=$((total + 1))
    cmp -s "$f" "$work/new/$(basename "$f")" && same=$((same + 1))
  done
  [ "$same" -eq "$total" ] || status=1
  printf '%-5s %-58s %d of %d files identical\n' "$([ "$same" -eq "$total" ] && echo ok || echo DIFF)" "$name" "$same" "$total"
}

run "shapes image model (30 classes + grid)" 1 --config configs/shapes-image.json --set output.grid=true
for fx in dit_odd dit_small_bf16; do
  for s in ddim dpm; do
    run "$fx $s" 1 --config tests/fixtures/$fx/reference/run_$s.json --set model.path=tests/fixtures/$fx \
      --init-noise tests/fixtures/$fx/reference/noise.safetensors --save-latents "$work/run/latents.safetensors"
  done
done
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
exit $status

#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ (build-fuzz: clang-16, ASan + UBSan;
# scripts/install_fuzz_deps.sh installs the compiler) and runs each on a copy
# of its seed corpus fuzz/corpus/<target>/.
#
#   scripts/fuzz.sh [SECONDS|-runs=N] [TARGET...]
#
# SECONDS (default 20) per target, or -runs=N executions per target; no
# TARGET: all of them. Prints per target the executions, libFuzzer's final
# coverage (cov: edges, ft: features) and the exit status. Exits non-zero
# when any target failed: a crash, sanitizer report, leak, timeout (10 s per
# input) or out-of-memory; the reproducer is in build-fuzz/artifacts/<target>/
# (replay: build-fuzz/fuzz/<target> FILE) and the log in build-fuzz/logs/.
# Inputs found this run stay in build-fuzz/work/<target>/ (not committed;
# copy the interesting ones to fuzz/corpus/ by hand).
# FUZZ_JOBS: build parallelism (default: nproc); FUZZ_PARALLEL: targets run
# at once (default: nproc).
set -uo pipefail
cd "$(dirname "$0")/.."

all_targets=(fuzz_safetensors fuzz_gguf fuzz_weight_index fuzz_model_configs fuzz_run_config fuzz_prompt_file
             fuzz_tokenizer_dir fuzz_unigram_tokenizer fuzz_manifest fuzz_png_read fuzz_lora_file
             fuzz_image_reader)
declare -A max_len=([fuzz_safetensors]=16384 [fuzz_gguf]=16384 [fuzz_weight_index]=4096
                    [fuzz_model_configs]=8192 [fuzz_run_config]=4096
                    [fuzz_prompt_file]=4096 [fuzz_tokenizer_dir]=32768
                    [fuzz_unigram_tokenizer]=65536 [fuzz_manifest]=4096 [fuzz_png_read]=8192
                    [fuzz_lora_file]=16384 [fuzz_image_reader]=32768)

limit=(-max_total_time=20)
if [ $# -gt 0 ]; then
  case "$1" in
    -runs=*[!0-9]* | -runs=) echo "fuzz.sh: bad $1 (want -runs=N)" >&2; exit 2 ;;
    -runs=*) limit=("$1"); shift ;;
    *[!0-9]*) ;;  # a target name
    *) limit=(-max_total_time="$1"); shift ;;
  esac
fi
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  [ -n "${max_len[$t]:-}" ] || { echo "fuzz.sh: unknown target '$t' (${all_targets[*]})" >&2; exit 2; }
done

build=build-fuzz
if [ ! -f $build/CMakeCache.txt ]; then
  cmake -S . -B $build -DDITGEN_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_CXX_COMPILER=clang++-16 -DCMAKE_C_COMPILER=clang-16 || exit 2
fi
cmake --build $build -j"${FUZZ_JOBS:-$(nproc)}" --target "${targets[@]}" || exit 2

# Symbolized stacks need llvm-symbolizer (package llvm-16, not installed by
# install_fuzz_deps.sh); without it reports show addresses only.
for s in /usr/lib/llvm-16/bin/llvm-symbolizer "$(command -v llvm-symbolizer || true)"; do
  [ -x "$s" ] && { export ASAN_SYMBOLIZER_PATH="$s"; break; }
done
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
export OMP_NUM_THREADS=1  # one fuzzing process, no OpenMP pool to leak-check

# One target's run: its summary line goes to $build/logs/<target>.line (the
# targets run side by side, FUZZ_PARALLEL at a time, default nproc: each
# fuzzing process is single-threaded, so on 2 cores two at once halve the
# wall time for the same seconds per target).
run_target() {
  local t=$1
  local work=$build/work/$t artifacts=$build/artifacts/$t log=$build/logs/$t.log
  rm -rf "$work"
  mkdir -p "$work" "$artifacts"
  cp fuzz/corpus/$t/* "$work"/
  $build/fuzz/$t "${limit[@]}" -max_len="${max_len[$t]}" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$artifacts/" "$work" >"$log" 2>&1
  local rc=$?
  local execs stats cov ft line
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  stats=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$stats")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$stats")
  line=$(printf '%-20s execs %-9s cov %-6s ft %-6s exit %s' "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$rc")
  [ $rc -ne 0 ] && line+="  FAILED: $(ls -t "$artifacts" | head -1 | sed "s|^|$artifacts/|"), log $log"
  echo "$line" >"$build/logs/$t.line"
  echo "$line"
}

mkdir -p $build/logs
parallel=${FUZZ_PARALLEL:-$(nproc)}
for t in "${targets[@]}"; do
  rm -f "$build/logs/$t.line"
  echo "== $t (${limit[*]}, -max_len=${max_len[$t]})"
  run_target "$t" &
  while [ "$(jobs -rp | wc -l)" -ge "$parallel" ]; do wait -n; done
done
wait

failed=0 passed=0
echo "== fuzz.sh summary"
for t in "${targets[@]}"; do
  line=$(cat "$build/logs/$t.line" 2>/dev/null || echo "$t: no result (the run did not finish)  FAILED")
  echo "$line"
  case "$line" in
    *FAILED*)
      failed=$((failed + 1))
      grep -E 'ERROR|SUMMARY|runtime error|terminate called|what\(\)|fuzz harness' "$build/logs/$t.log" | head -5 ;;
    *) passed=$((passed + 1)) ;;
  esac
done
# The plain closing line CI reads: targets that ran clean / found something.
echo "fuzz: $passed passed, $failed failed"
[ $failed -eq 0 ]

#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU: build samplab with CUDA and the llama.cpp
# backend (llama.cpp's CUDA build too), run the GPU tests (the CPU's fidelity and
# batch-invariance tests on the GPU), benchmark the real SmolLM2 file and the synthetic 135M
# and 1.7B shapes on both backends side by side, and print one JSON summary on stdout (logs go to
# stderr and to $GPU_CHECK_LOGS, default target/gpu-check).
#
# Uses the machine's CUDA toolkit when nvcc is on PATH, else installs one from PyPI
# (scripts/cuda-toolkit.sh). CI never runs this: it needs a GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
logs="${GPU_CHECK_LOGS:-target/gpu-check}"
mkdir -p "$logs"
say() { echo "== $*" >&2; }

gpu="$(nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>/dev/null | head -1)"
[ -n "$gpu" ] || { echo "gpu-check: nvidia-smi finds no NVIDIA GPU" >&2; exit 1; }
say "GPU: $gpu"
if [ -z "${CUDA_COMPUTE_CAP:-}" ]; then
  CUDA_COMPUTE_CAP="$(echo "$gpu" | awk -F', ' '{print $4}' | tr -d .)"
  export CUDA_COMPUTE_CAP
fi
if ! command -v nvcc >/dev/null; then
  say "installing a CUDA toolkit from PyPI"
  # shellcheck source=scripts/cuda-toolkit.sh
  source scripts/cuda-toolkit.sh || exit 1
fi

say "cargo build --release --features cuda,llama-cpp"
cargo build --release --features cuda,llama-cpp >&2 || exit 1
build_s=$(($(date +%s) - started))

say "GPU tests"
cargo test --release --features cuda,llama-cpp --test suite -- --ignored gpu 2>&1 | tee "$logs/tests.log" >&2
tests_status=${PIPESTATUS[0]}
tests_passed=$(grep -o '[0-9]* passed' "$logs/tests.log" | tail -1 | cut -d' ' -f1)
tests_failed=$(grep -o '[0-9]* failed' "$logs/tests.log" | tail -1 | cut -d' ' -f1)

bench() { # name, then bench arguments
  local name=$1
  shift
  say "bench $name"
  if target/release/samplab bench --device cuda --samples 1,8 --tokens 128 --json "$@" \
    >"$logs/$name.json" 2>"$logs/$name.err"; then
    cat "$logs/$name.json"
  else
    tail -3 "$logs/$name.err" >&2
    printf '{"error": %s}' "$(tail -1 "$logs/$name.err" | sed 's/\\/\\\\/g; s/"/\\"/g; s/^/"/; s/$/"/')"
  fi
}
real="${SAMPLAB_REAL_MODEL:-../shared/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf}"
if [ -f "$real" ]; then
  real_json=$(bench smollm2-135m-q4_1 --model "$real")
else
  real_json='{"error": "the real SmolLM2 file is not here: set SAMPLAB_REAL_MODEL"}'
fi
synthetic_json=$(bench synthetic-135m-q4_k_m --synthetic smollm2-135m --qtype q4_k_m)
large_json=$(bench synthetic-1.7b-q8_0 --synthetic smollm2-1.7b --qtype q8_0)
# The same files on llama.cpp's CUDA backend, the figures `auto` chooses by on a GPU.
if [ -f "$real" ]; then
  real_llama_json=$(bench smollm2-135m-q4_1-llama.cpp --model "$real" --backend llama.cpp)
else
  real_llama_json='{"error": "the real SmolLM2 file is not here: set SAMPLAB_REAL_MODEL"}'
fi
large_llama_json=$(bench synthetic-1.7b-q8_0-llama.cpp --synthetic smollm2-1.7b --qtype q8_0 --backend llama.cpp)

cat <<JSON
{
  "gpu": "$gpu",
  "build_seconds": $build_s,
  "tests": {"exit_status": $tests_status, "passed": ${tests_passed:-0}, "failed": ${tests_failed:-0}},
  "bench": {
    "smollm2-135m-q4_1": $real_json,
    "synthetic-smollm2-135m-q4_k_m": $synthetic_json,
    "synthetic-smollm2-1.7b-q8_0": $large_json,
    "smollm2-135m-q4_1 on llama.cpp": $real_llama_json,
    "synthetic-smollm2-1.7b-q8_0 on llama.cpp": $large_llama_json
  },
  "seconds": $(($(date +%s) - started))
}
JSON
[ "$tests_status" -eq 0 ]

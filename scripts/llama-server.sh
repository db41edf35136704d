#!/usr/bin/env bash
# llama-cpp-python's OpenAI-compatible server, for the remote-engine tests: a venv with
# llama-cpp-python[server] built from source, then SAMPLAB_LLAMA_SERVER_PYTHON names its Python.
# Source it: `source scripts/llama-server.sh`. The venv goes to $SAMPLAB_LLAMA_VENV
# (default target/llama-venv) and is reused when it already has the server.
#
# The build leaves out AMX: on Xeons that have it, a native build crashes on quantized models;
# and the multimodal library (LLAVA_BUILD), which the server loads only for image models.
set -euo pipefail

venv="${SAMPLAB_LLAMA_VENV:-$PWD/target/llama-venv}"
if ! "$venv/bin/python" -c 'import llama_cpp.server' 2>/dev/null; then
  echo "== installing llama-cpp-python[server] into $venv (builds llama.cpp: a few minutes)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=ON \
-DGGML_AVX512_VNNI=ON -DGGML_AMX_INT8=OFF -DGGML_AMX_TILE=OFF -DLLAMA_BUILD_TESTS=OFF \
-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAVA_BUILD=OFF" \
    "$venv/bin/pip" install -q --no-cache-dir 'llama-cpp-python[server]==0.3.36'
fi
export SAMPLAB_LLAMA_SERVER_PYTHON="$venv/bin/python"

# Sourced by .ci/run and scripts/gpu-check.sh: a CUDA toolkit from PyPI, so that
# `cargo build --features cuda` works on a machine with no CUDA installed (and no GPU).
#
# NVIDIA publishes nvcc, the runtime headers and the libraries candle links as wheels. cudarc
# 0.19 knows CUDA up to 13.4, so the compiler family is pinned there. The wheels name their
# libraries with versions only (libcublas.so.13): the linker wants unversioned names, so they
# get symlinks. The driver's libcuda comes with the NVIDIA driver, not with the toolkit, so a
# stub libcuda.so (every driver function cudarc declares, each returning an error) stands in
# for the link; at run time the driver's libcuda.so.1 is loaded instead.
#
# Variables: SAMPLAB_CUDA_VENV (where the toolkit lives; default ~/.cache/samplab/cuda-venv),
# CUDA_COMPUTE_CAP (the GPU architecture compiled for; default 90, Hopper).

SAMPLAB_CUDA_VENV="${SAMPLAB_CUDA_VENV:-$HOME/.cache/samplab/cuda-venv}"
samplab_cuda_wheels=(
  nvidia-cuda-nvcc==13.4.92 nvidia-cuda-crt==13.4.92 nvidia-nvvm==13.4.92
  nvidia-cuda-runtime==13.4.92 nvidia-cuda-nvrtc==13.4.92 nvidia-cuda-cccl==13.3.5.0.6
  nvidia-cublas==13.4.3.11 nvidia-curand==10.4.4.72
)

if [ ! -x "$SAMPLAB_CUDA_VENV/bin/python" ]; then
  python3 -m venv "$SAMPLAB_CUDA_VENV" || {
    echo "cannot create a Python venv for the CUDA toolkit: install python3-venv" >&2
    return 1
  }
fi
"$SAMPLAB_CUDA_VENV/bin/pip" install -q --no-cache-dir "${samplab_cuda_wheels[@]}"

CUDA_ROOT="$(echo "$SAMPLAB_CUDA_VENV"/lib/python3*/site-packages/nvidia/cu13)"
export CUDA_ROOT CUDA_HOME="$CUDA_ROOT" NVCC="$CUDA_ROOT/bin/nvcc"
export CUDARC_CUDA_VERSION=13040 CUDA_COMPUTE_CAP="${CUDA_COMPUTE_CAP:-90}"
export PATH="$CUDA_ROOT/bin:$PATH"
export LIBRARY_PATH="$CUDA_ROOT/lib${LIBRARY_PATH:+:$LIBRARY_PATH}"
export LD_LIBRARY_PATH="$CUDA_ROOT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

for versioned in "$CUDA_ROOT"/lib/lib*.so.*; do
  ln -sfn "$(basename "$versioned")" "${versioned%%.so.*}.so"
done

# The stub is found first at link time (cudarc searches $CUDA_ROOT/lib/stubs); its soname makes
# the binary load the driver's libcuda.so.1 at run time, so it serves where a driver exists too.
# On a fresh machine nothing has unpacked cudarc yet: ls finds nothing, which under the caller's
# `set -e -o pipefail` must not end the script before `cargo fetch` below unpacks it.
samplab_driver_rs="$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/cudarc-0.19.*/src/driver/sys/mod.rs 2>/dev/null | tail -1 || true)"
if [ -z "$samplab_driver_rs" ]; then
  cargo fetch -q
  samplab_driver_rs="$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/cudarc-0.19.*/src/driver/sys/mod.rs | tail -1)"
fi
mkdir -p "$CUDA_ROOT/lib/stubs"
# Each returns CUDA_ERROR_STUB_LIBRARY (34), as NVIDIA's own stub does.
sed -n 's/^ *fn \(cu[A-Za-z0-9_]*\)(.*/int \1(void) { return 34; }/p' "$samplab_driver_rs" |
  sort -u >"$CUDA_ROOT/lib/stubs/libcuda.c"
cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$CUDA_ROOT/lib/stubs/libcuda.so" \
  "$CUDA_ROOT/lib/stubs/libcuda.c"

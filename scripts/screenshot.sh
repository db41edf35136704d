#!/usr/bin/env bash
# Draws docs/playground.svg, the README's picture: the real playground on samplab-tiny in a
# 120x32 tmux pane, captured with its colours and turned into an SVG.
#
#   bash scripts/screenshot.sh                   # builds with `cargo build --release` first
#   SAMPLAB_BIN=path/to/samplab bash scripts/screenshot.sh [OUT.svg]
#
# Needs tmux and python3 (standard library only).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/docs/playground.svg}"
cols=120
rows=32

if [[ -z "${SAMPLAB_BIN:-}" ]]; then
    (cd "$root" && cargo build --release)
    SAMPLAB_BIN="$root/target/release/samplab"
fi
command -v tmux >/dev/null || { echo "screenshot.sh needs tmux" >&2; exit 1; }

work="$(mktemp -d)"
socket="samplab-shot-$$"
cleanup() {
    tmux -L "$socket" kill-server 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# An empty config directory, so that the user's presets and themes stay out of the picture.
mkdir -p "$work/config"
printf -v cmd '%q ' env SAMPLAB_CONFIG_DIR="$work/config" TERM=xterm-256color COLORTERM=truecolor \
    "$SAMPLAB_BIN" --prompt "Once upon a time" --set num_samples=3 --set max_tokens=96 --set seed=7
tmux -L "$socket" -f /dev/null new-session -d -x "$cols" -y "$rows" -s shot "$cmd"

# Done once the status bar shows the run's speed and the screen stops changing.
capture() { tmux -L "$socket" capture-pane -p -t shot; }
wait_still() {
    local last="" now stable=0
    for _ in $(seq 1 240); do
        sleep 0.5
        now="$(capture 2>/dev/null || true)"
        if [[ "$now" == *"tok/s"* && "$now" == "$last" ]]; then
            stable=$((stable + 1))
            ((stable >= 3)) && return 0
        else
            stable=0
        fi
        last="$now"
    done
    echo "screenshot.sh: the playground did not settle; the pane shows:" >&2
    capture >&2 || true
    return 1
}
wait_still

# Into the sample columns, a few tokens along: the inspector shows the token's alternatives.
tmux -L "$socket" send-keys -t shot Tab Tab Home
for _ in 1 2 3; do tmux -L "$socket" send-keys -t shot Right; done
wait_still

tmux -L "$socket" capture-pane -e -p -t shot >"$work/pane.ansi"
python3 "$root/scripts/ansi_to_svg.py" "$work/pane.ansi" "$out" --cols "$cols" --rows "$rows"
echo "wrote $out"

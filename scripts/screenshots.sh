#!/usr/bin/env bash
# Renders the approval page and the inbox (approvals/shots_test.go) to
# static HTML, then photographs each file with headless Chromium: desktop
# (1280x900), phone (390x844), phone in dark mode, and the phone page down
# to 2000 px. The PNGs are for looking at, not for committing.
#
#   scripts/screenshots.sh [DIR]     # default: $TMPDIR/toolgate-shots
#
# Needs chromium (Debian: apt-get install chromium); CHROMIUM names another
# binary. CI does not run this.
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:-${TMPDIR:-/tmp}/toolgate-shots}
mkdir -p "$out/html"
out=$(cd "$out" && pwd)

browser=${CHROMIUM:-}
if [ -z "$browser" ]; then
  for b in chromium chromium-browser google-chrome; do
    if command -v "$b" >/dev/null 2>&1; then browser=$b; break; fi
  done
fi
if [ -z "$browser" ]; then
  echo "no chromium found; install it (apt-get install chromium) or set CHROMIUM" >&2
  exit 1
fi

rm -f "$out"/html/*.html "$out"/*.png
go test -count=1 -run '^TestScreenshots$' ./approvals/ -args -shots="$out/html"

shot() { # html png width,height [extra flags]
  local html=$1 png=$2 size=$3
  shift 3
  # Chromium wants a fresh profile per run when several run in a row.
  local profile
  profile=$(mktemp -d)
  "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
    --user-data-dir="$profile" "$@" --window-size="$size" --screenshot="$png" "file://$html" >/dev/null 2>&1
  rm -rf "$profile"
  [ -s "$png" ] || { echo "no screenshot written for $html" >&2; return 1; }
}

for html in "$out"/html/*.html; do
  name=$(basename "$html" .html)
  shot "$html" "$out/$name-desktop.png" 1280,900
  shot "$html" "$out/$name-phone.png" 390,844
  shot "$html" "$out/$name-phone-dark.png" 390,844 --force-dark-mode --blink-settings=preferredColorScheme=0
  shot "$html" "$out/$name-phone-full.png" 390,2000 # what follows the first screen
done
ls -1 "$out"/*.png

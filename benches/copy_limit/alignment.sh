#!/usr/bin/env bash
# Where does a kernel copy pay? Copies 1 GiB between offsets that are page-aligned, equal
# modulo a page but not aligned (872 bytes in, as a safetensors header leaves them), and
# different modulo a page, with copy_file_range and with write(2) from a map, ROUNDS times
# each, sorted so that each case's runs sit together. Run it on an idle machine.
#   benches/copy_limit/alignment.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")"
rounds=${1:-3}
work=../data/copy_limit
mkdir -p "$work"
cc -O2 -o "$work/alignment" alignment.c
input=$work/alignment.in
[ -f "$input" ] || head -c $((1 << 30)) /dev/urandom > "$input"
cat "$input" > /dev/null
for _ in $(seq "$rounds"); do
  for case in "cfr 0 0 16384" "cfr 13160 13160 16384" "cfr 13160 12288 16384" \
              "map 0 0 1024" "map 13160 13160 1024" "map 13160 12288 1024" \
              "map 13160 12288 16384" "pread 13160 12288 1024"; do
    # shellcheck disable=SC2086
    "$work/alignment" $case "$input" "$work/alignment.out"
  done
done | sort -k1,1 -k2,2n -k4,4n -k5,5n
rm -f "$work/alignment.out"

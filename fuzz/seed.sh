#!/usr/bin/env bash
# Seeds each fuzz target's corpus with the committed fixtures of its format.
set -euo pipefail
cd "$(dirname "$0")"
seed() { # target, find expression...
  local target=$1; shift
  mkdir -p "corpus/$target"
  find ../fixtures "$@" -print0 | while IFS= read -r -d '' f; do
    cp "$f" "corpus/$target/$(echo "${f#../fixtures/}" | tr / _)"
  done
  echo "corpus/$target: $(ls "corpus/$target" | wc -l) seeds"
}
seed npy_header -name '*.npy' -size -64k
seed safetensors_header -name '*.safetensors'
seed npz_directory -name '*.npz'

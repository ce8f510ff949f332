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
seed json_reader -name '*.json'
mkdir -p corpus/json_reader
printf '[[1,2],[3,4]]' > corpus/json_reader/nested
printf '{"dtype": "float16", "shape": [2, 2], "data": [1.5, "NaN", "-Infinity", 2e-3]}' > corpus/json_reader/object
printf '[[true, false], [false, true]]' > corpus/json_reader/bools
printf '[["ab", "c"], ["de", "f"]]' > corpus/json_reader/strings
printf '[18446744073709551615, -1.5e300, 0]' > corpus/json_reader/numbers

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
seed gguf_header -name '*.gguf'
seed pytorch_file \( -path '*pytorch*' -o -path '*transformers*' \) \( -name '*.pt' -o -name '*.bin' \) -size -64k
mkdir -p corpus/pickle_vm
for f in ../fixtures/pytorch/*.pt ../fixtures/transformers/llama/*.bin ../fixtures/attack/shared_tree.pt; do
  (cd corpus/pickle_vm && python3 -c 'import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
name = next((n for n in z.namelist() if n.endswith("/data.pkl")), None)
if name: open(sys.argv[2], "wb").write(z.read(name))' "../../$f" "$(basename "$f" .pt).pkl") || true
done
echo "corpus/pickle_vm: $(ls corpus/pickle_vm | wc -l) seeds"
mkdir -p corpus/json_reader
printf '[[1,2],[3,4]]' > corpus/json_reader/nested
printf '{"dtype": "float16", "shape": [2, 2], "data": [1.5, "NaN", "-Infinity", 2e-3]}' > corpus/json_reader/object
printf '[[true, false], [false, true]]' > corpus/json_reader/bools
printf '[["ab", "c"], ["de", "f"]]' > corpus/json_reader/strings
printf '[18446744073709551615, -1.5e300, 0]' > corpus/json_reader/numbers
# The whole run: pairs of small fixtures of one format, behind the target's 4-byte prefix
# (axis 0; output .npy for .npy and JSON inputs, .npz or .safetensors for containers).
mkdir -p corpus/join
pair() { # name, output-format code (0 npy, 1 npz, 2 safetensors, 3 json), first, second
  local len; len=$(stat -c %s "$3")
  { printf '\x00'; printf "\\x$(printf %02x "$2")"
    printf "\\x$(printf %02x $((len & 255)))\\x$(printf %02x $((len >> 8 & 255)))"
    cat "$3" "$4"; } > "corpus/join/$1"
}
find ../fixtures -name '*.npy' -size -16k | sed -n 1,40p | while read -r f; do pair "npy_$(echo "$f" | tr / _)" 0 "$f" "$f"; done
find ../fixtures -name '*.npz' -size -16k | sed -n 1,20p | while read -r f; do pair "npz_$(echo "$f" | tr / _)" 1 "$f" "$f"; done
find ../fixtures -name '*.safetensors' -size -16k | sed -n 1,20p | while read -r f; do pair "st_$(echo "$f" | tr / _)" 2 "$f" "$f"; done
printf '\x00\x00\x0d\x00[[1,2],[3,4]][[5,6],[7,8]]' > corpus/join/json_pair
echo "corpus/join: $(ls corpus/join | wc -l) seeds"
# A distributed checkpoint: each case of fixtures/dcp as the target's records, an options
# byte of 0 (the rank files named one by one, output .safetensors), then per rank file its
# header and its data, each behind its length (u16, little-endian).
mkdir -p corpus/dcp
u16() { printf "\\x$(printf %02x $(($1 & 255)))\\x$(printf %02x $(($1 >> 8 & 255)))"; }
for case in ../fixtures/dcp/*/; do
  { printf '\x00'
    for f in "$case"shard-*.safetensors; do
      header=$(od -An -tu8 -N8 "$f" | tr -d ' '); size=$(stat -c %s "$f")
      u16 "$header"; tail -c +9 "$f" | head -c "$header"
      u16 $((size - 8 - header)); tail -c +$((9 + header)) "$f"
    done; } > "corpus/dcp/$(basename "$case")"
done
echo "corpus/dcp: $(ls corpus/dcp | wc -l) seeds"
# DCP's default form: every .metadata of fixtures/dcp_default (the target reads it beside the
# rank files of ranks2/).
mkdir -p corpus/dcp_metadata
for f in ../fixtures/dcp_default/*/.metadata; do
  cp "$f" "corpus/dcp_metadata/$(basename "$(dirname "$f")").metadata"
done
echo "corpus/dcp_metadata: $(ls corpus/dcp_metadata | wc -l) seeds"
# The same .metadata files, and the hostile one of fixtures/attack/, straight into the reader.
mkdir -p corpus/dcp_metadata_pickle
cp corpus/dcp_metadata/* corpus/dcp_metadata_pickle/
cp ../fixtures/attack/dcp_fanout/.metadata corpus/dcp_metadata_pickle/attack_fanout.metadata
echo "corpus/dcp_metadata_pickle: $(ls corpus/dcp_metadata_pickle | wc -l) seeds"
# The hostile archives of fixtures/attack/ beside the .npz fixtures.
cp ../fixtures/attack/*.npz ../fixtures/attack/*.pt corpus/npz_directory/

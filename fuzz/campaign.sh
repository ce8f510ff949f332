#!/usr/bin/env bash
# Runs every fuzz target for SECONDS (default 600) each, one after another, and appends a
# summary line per target to results.txt. Usage: fuzz/campaign.sh [SECONDS] [TARGET...]
set -uo pipefail
cd "$(dirname "$0")"
seconds=${1:-600}; shift || true
targets=("$@"); [ ${#targets[@]} -gt 0 ] || targets=(npy_header safetensors_header npz_directory json_reader gguf_header join dcp)
./seed.sh > /dev/null
# ASan keeps freed memory in a quarantine of up to 256 MiB by default, which -rss_limit_mb
# would count as the target's: a small one makes the limit measure tjoin.
export ASAN_OPTIONS=${ASAN_OPTIONS:-quarantine_size_mb=16}
for t in "${targets[@]}"; do
  log=logs/$t.log; mkdir -p logs "artifacts/$t"
  cargo +nightly fuzz run -O "$t" "corpus/$t" -- -max_total_time="$seconds" -rss_limit_mb=256 \
    -timeout=5 -print_final_stats=1 > "$log" 2>&1
  status=$?
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  crashes=$(ls "artifacts/$t" | wc -l)
  echo "$(date -u +%F) $t: ${seconds}s, ${runs:-?} executions, exit $status, $crashes artifacts" | tee -a results.txt
done

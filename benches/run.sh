#!/usr/bin/env bash
# Builds tjoin in release mode, installs what the benchmark needs (numpy, GNU time), and runs
# benches/bench.py with the arguments given, e.g.  benches/run.sh --scale 0.1 axis0 mid
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -c 'import numpy' 2>/dev/null || python3 -m pip install --quiet numpy
[ -x /usr/bin/time ] || { apt-get update -qq && apt-get install -y -qq time; }
cargo build --release --quiet
exec python3 benches/bench.py "$@"

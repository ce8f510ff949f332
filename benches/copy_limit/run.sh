#!/usr/bin/env bash
# Is there a faster way than `cat` to write the axis0 scenario's output on this machine?
# Compares cat, tjoin and the copy methods of copy_methods.c on two 1 GiB inputs: paired,
# interleaved rounds with the inputs re-read before each run, as benches/bench.py does.
#   benches/copy_limit/run.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")"
rounds=${1:-7}
work=../data/copy_limit
mkdir -p "$work"
cc -O2 -pthread -o "$work/copy_methods" copy_methods.c
(cd ../.. && cargo build --release --quiet)
exec python3 - "$work" "$rounds" <<'PY'
import os, statistics, subprocess, sys, time
work, rounds = sys.argv[1], int(sys.argv[2])
inputs = [f"{work}/in1.npy", f"{work}/in2.npy"]
# float32 (262144, 1024), as numpy.save writes it: a 128-byte header, then 1 GiB of data.
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (262144, 1024), }"
header += " " * (21 - 6)
header = header + " " * (128 - 10 - len(header) - 1) + "\n"
for path in inputs:
    if not os.path.exists(path):
        with open(path, "wb") as f:
            f.write(b"\x93NUMPY\x01\x00" + (118).to_bytes(2, "little") + header.encode())
            for _ in range(64):
                f.write(os.urandom(16 << 20))
out = f"{work}/out.npy"
runs = {
    "cat": ["sh", "-c", 'cat "$1" "$2" > "$0"', out, *inputs],
    "tjoin": ["../../target/release/tjoin", "-a", "0", *inputs, "-o", out],
}
for method in os.environ.get("METHODS", "cfr splice rw cfr2 mmap2").split():
    runs[method] = [f"{work}/copy_methods", method, out, *inputs]
times = {name: [] for name in runs}
names = list(runs)
for r in range(rounds):
    for name in names[r % len(names):] + names[:r % len(names)]:
        if os.path.exists(out):
            os.unlink(out)
        for path in inputs:
            with open(path, "rb") as f:
                while f.read(16 << 20):
                    pass
        start = time.perf_counter()
        subprocess.run(runs[name], check=True)
        times[name].append(time.perf_counter() - start)
os.unlink(out)
print(f"two 1 GiB inputs into one file, {rounds} rounds")
for name in names:
    ratio = statistics.median(t / c for t, c in zip(times[name], times["cat"]))
    print(f"  {name:<8} median {statistics.median(times[name]):.3f} s   {ratio:.2f}x cat")
PY

"""Inputs for the copy engine's kernel-copy comparisons (issue 41, merges at `cat`'s speed).
Writes benches/data/engine_copy/: two float32 (8192, 8192) .npy files (256 MiB each, their
data 128 bytes into a page, as every .npy's), joined on axis 0 (one whole input after the
other) and on axis 1 (8192 rounds of two 32 KiB runs, packed through the buffer), and two
float32 (64, 1048576) files joined on axis 1 (64 rounds of two 4 MiB runs, each past the
engine's direct-copy length, at offsets on no page). Prints the paired commands to time.

    python3 benches/engine_copy.py

Deterministic (numpy's generator, seed 41). Needs numpy only.
"""
import os

import numpy as np


def main():
    folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "engine_copy")
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(41)
    for name, shape in [("a", (8192, 8192)), ("b", (8192, 8192)),
                        ("wide_a", (64, 1 << 20)), ("wide_b", (64, 1 << 20))]:
        path = os.path.join(folder, name + ".npy")
        if not os.path.exists(path):
            np.save(path, rng.standard_normal(shape, dtype=np.float32))
    os.sync()
    print(f"in {folder}:")
    print("tjoin -a 0 a.npy b.npy -o out.npy            vs  sh -c 'cat a.npy b.npy > cat.out'")
    print("tjoin -a 1 a.npy b.npy -o out.npy            (runs of 32 KiB, packed)")
    print("tjoin -a 1 wide_a.npy wide_b.npy -o out.npy  (runs of 4 MiB, copied directly)")


if __name__ == "__main__":
    main()

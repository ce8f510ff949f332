#!/usr/bin/env bash
# CI stage fuzz-check: the fuzz targets (fuzz/, a crate of their own outside tjoin's
# workspace) type-check, as they call tjoin's API, which moves. The shared target folder lets
# them reuse the dependencies built by the stages before where versions and features agree.
# Running them needs nightly and cargo-fuzz: fuzz/README.md.
source "$(dirname "$0")/lib.sh"
cargo check --manifest-path fuzz/Cargo.toml --bins

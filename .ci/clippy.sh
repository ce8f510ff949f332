#!/usr/bin/env bash
# CI stage clippy: no lint warns, in the code, its tests, examples and benches.
source "$(dirname "$0")/lib.sh"
cargo clippy --all-targets -- -D warnings

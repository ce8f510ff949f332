#!/usr/bin/env bash
# CI stage clippy-directml: the same with the DirectML backend compiled in (its device code
# against the stand-ins of src/backend/directml/unavailable.rs off Windows), which also
# type-checks the DirectML examples the Wine stage runs.
source "$(dirname "$0")/lib.sh"
cargo clippy --features directml --all-targets -- -D warnings

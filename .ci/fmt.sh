#!/usr/bin/env bash
# CI stage fmt: the code is as rustfmt writes it.
source "$(dirname "$0")/lib.sh"
cargo fmt --all -- --check

#!/usr/bin/env bash
# CI stage test-directml: what the directml feature changes off Windows: the device code
# against its stand-ins (the failure path), the bindings' drift check, and the backend choice
# (`--backend auto` falls back to the CPU engine; the early copy's tests use it). The rest of
# the suite runs the same code either way, and ran in the test stage. The unit tests with the
# feature run in the Wine stage (the Windows test binaries); its examples are type-checked by
# clippy-directml and built for Windows there.
source "$(dirname "$0")/lib.sh"
cargo test --features directml --test integration -- directml early_copy

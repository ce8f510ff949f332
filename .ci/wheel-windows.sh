#!/usr/bin/env bash
# CI stage wheel-windows: the Windows wheel built, and what it holds checked (no Windows Python
# under Wine here to install it with). Built with the dev profile, features and folder of the
# Wine stage's Windows build, whose compiled dependencies it reuses (26 s instead of 73 at
# opt-level 1, which was 290 s of CPU at opt-level 3); cargo relinks
# target/x86_64-pc-windows-gnu/debug/tjoin.exe, so the Wine stage, which may still be running,
# tests the copy it made of it (.ci/directml-wine.sh, TJOIN_TEST_BIN).
source "$(dirname "$0")/lib.sh"
if ! rustup target list --installed | grep -qx x86_64-pc-windows-gnu \
    || ! command -v x86_64-w64-mingw32-gcc >/dev/null; then
    echo "SKIPPED: the Windows wheel: needs the x86_64-pc-windows-gnu target and mingw-w64"
    exit 0
fi
maturin build --profile dev --target x86_64-pc-windows-gnu --features directml \
    -o "$WHEELS/windows"
wheel=$(ls "$WHEELS"/windows/tjoin-*-py3-none-win_amd64.whl)
show_wheel "$wheel"
contents=$(python3 -m zipfile -l "$wheel")
grep -q '^tjoin-[^ ]*\.data/scripts/tjoin\.exe ' <<<"$contents"
grep -q '^tjoin/__main__\.py ' <<<"$contents"
# Not redistributed (README.md, "Installing"): Windows ships it, or the user adds it.
if grep -qi 'directml\.dll' <<<"$contents"; then
    echo "the Windows wheel holds DirectML.dll, which it must not redistribute"
    exit 1
fi
echo "   win_amd64, tjoin.exe and the module, without DirectML.dll: ok"

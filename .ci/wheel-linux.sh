#!/usr/bin/env bash
# CI stage wheel-linux: the sdist, and the Linux wheel built from it (pyproject.toml; README.md,
# "Installing"), with maturin from .ci/requirements.txt. A static binary for the musl target,
# which maturin tags manylinux_2_5 (any glibc since 2007); where rustup cannot add that target,
# zig from PyPI links against glibc 2.28: tjoin calls copy_file_range, which glibc has since
# 2.27, so manylinux2014's 2.17 cannot link. Built with the wheel-ci profile (Cargo.toml: release
# without LTO and its single codegen unit); published wheels are built with --release.
source "$(dirname "$0")/lib.sh"
ZIGLANG_VERSION=0.17.1
maturin --version
LINUX_TARGET=x86_64-unknown-linux-musl
LINUX=(--target $LINUX_TARGET)
if ! rustup target list --installed | grep -qx $LINUX_TARGET \
    && ! rustup target add $LINUX_TARGET; then
    echo "   rustup could not add $LINUX_TARGET: zig for manylinux_2_28 instead"
    "$CI_TOOLS/bin/python" -m ziglang version >/dev/null 2>&1 \
        || "$CI_TOOLS/bin/pip" install -q "ziglang==$ZIGLANG_VERSION"
    LINUX_TARGET=x86_64-unknown-linux-gnu
    LINUX=(--zig --compatibility manylinux_2_28 --target $LINUX_TARGET)
fi
if [ $LINUX_TARGET = x86_64-unknown-linux-musl ]; then
    # ring (object storage's signing and TLS) compiles C and assembly for the target: for
    # musl, Debian's musl-gcc (musl-tools), installed here when missing.
    if ! command -v musl-gcc >/dev/null; then
        { apt-get update -qq && apt-get install -y -qq --no-install-recommends musl-tools; } \
            >"$WHEELS-apt.log" 2>&1 || { tail -5 "$WHEELS-apt.log"; exit 1; }
    fi
    export CC_x86_64_unknown_linux_musl=musl-gcc
fi
echo "   maturin build --sdist ${LINUX[*]}"
rm -rf "$WHEELS"
# maturin unpacks the sdist with fixed file times (2006), older than any earlier build of tjoin
# in the kept target folder, which cargo would then take as current (and the wheel would hold
# an old tjoin): tjoin's own artifacts go first, so that the wheel is built from this sdist.
cargo clean -q -p tjoin --profile wheel-ci --target $LINUX_TARGET
maturin build --sdist --profile wheel-ci "${LINUX[@]}" -o "$WHEELS/linux"
ls "$WHEELS"/linux/tjoin-*.tar.gz >/dev/null
echo "   $(basename "$WHEELS"/linux/tjoin-*.tar.gz): $(stat -c %s "$WHEELS"/linux/tjoin-*.tar.gz) bytes"
show_wheel "$WHEELS"/linux/tjoin-*.whl

# The Wine stage's environment, sourced by .ci/directml-wine.sh from the repository's root
# (never run alone): Debian's packages, lavapipe, the Windows build of tjoin and its test
# binaries, DirectML.dll, the Wine shim, a virtual display and the Wine prefix, each a timed
# step. It leaves the stage the paths it made (EXE, COMPARE, SPLIT_COMPARE, TESTS, BIN, WITH,
# WITHOUT, WORK), the helpers `skip`, `fail`, `step` and `done_step`, and Wine's server and
# desktop running until the stage exits. Where the environment cannot be had, `skip` ends the
# stage with a SKIPPED line (and type-checks the Windows build instead).
ROOT=$PWD
CACHE=${TJOIN_WINE_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/tjoin-directml-wine}
TARGET=x86_64-pc-windows-gnu
WORK=$ROOT/target/directml-wine
export DEBIAN_FRONTEND=noninteractive

# The Windows build below is also CI's only check that tjoin compiles for Windows: a run that
# stops before it type-checks that build instead, where the Rust target is installed.
WINDOWS_BUILT=0
skip() {
    echo
    echo "######################################################################"
    echo "SKIPPED: DirectML under Wine: $*"
    echo "######################################################################"
    if [ $WINDOWS_BUILT = 0 ]; then
        if rustup target list --installed 2>/dev/null | grep -qx "$TARGET"; then
            echo "== directml-wine: cargo check for $TARGET instead of the Windows build"
            cargo check --target "$TARGET" --features directml || fail "the Windows build fails"
        else
            echo "The Windows build is not checked: the $TARGET standard library is not installed"
            echo "(rustup target add $TARGET, where the network allows it)"
        fi
    fi
    exit 0
}
fail() {
    echo "directml-wine: FAILED: $*" >&2
    exit 1
}

# step NAME: starts timing a step; done_step prints how long it took.
step() {
    STEP=$1
    STEP_START=$(date +%s%N)
    echo "== directml-wine: $STEP"
}
done_step() {
    local tenths=$((($(date +%s%N) - STEP_START) / 100000000))
    echo "   took $((tenths / 10)).$((tenths % 10)) s: $STEP"
}
TOTAL_START=$(date +%s)
mkdir -p "$CACHE" "$WORK"

[ "$(uname -m)" = x86_64 ] || skip "needs an x86_64 machine, this is $(uname -m)"
# shellcheck disable=SC1091
codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
[ "$codename" = bookworm ] || skip "written for Debian 12 (bookworm), this is '${codename:-unknown}'"

# ---------------------------------------------------------------------------------------------
step "Debian packages (mingw, Wine, Xvfb, Vulkan loader, lavapipe's libraries)"
# lavapipe's shared libraries: what Mesa 25's libvulkan_lvp.so and libgallium need from
# bookworm itself (the two libdrm libraries come with Mesa from backports).
PACKAGES=(gcc-mingw-w64-x86-64 wine wine64 libwine xvfb xauth libvulkan1 vulkan-tools unzip
    libllvm15 libsensors5 libx11-xcb1 libxcb-dri3-0 libxcb-present0 libxcb-randr0
    libxcb-shm0 libxcb-sync1 libxcb-xfixes0 libxshmfence1 libwayland-client0 libelf1
    libdrm-intel1 libpciaccess0 libzstd1 libexpat1 binutils-mingw-w64-x86-64)
missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q 'install ok installed' \
        || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    [ "$(id -u)" = 0 ] || skip "these packages are missing and this is not root: ${missing[*]}"
    apt-get update -qq >/dev/null 2>&1 || skip "apt-get update failed"
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >"$WORK/apt.log" 2>&1 \
        || { tail -5 "$WORK/apt.log"; skip "apt-get install ${missing[*]} failed"; }
    echo "   installed: ${missing[*]}"
else
    echo "   all installed"
fi
done_step

# ---------------------------------------------------------------------------------------------
step "lavapipe from bookworm-backports' Mesa, unpacked into $CACHE/mesa"
LIB=$CACHE/mesa/usr/lib/x86_64-linux-gnu
if [ ! -f "$LIB/libvulkan_lvp.so" ]; then
    # A private apt configuration: the system's sources and lists are left alone.
    APT=$CACHE/apt
    mkdir -p "$APT/lists/partial" "$APT/archives/partial" "$CACHE/debs"
    mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null)
    mirror=${mirror:-http://deb.debian.org/debian}
    echo "deb $mirror bookworm-backports main" >"$APT/sources.list"
    apt_private=(-o "Dir::Etc::SourceList=$APT/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
        -o "Dir::State::Lists=$APT/lists" -o "Dir::Cache=$APT" -o "APT::Sandbox::User=root"
        -o "Debug::NoLocking=1")
    apt-get "${apt_private[@]}" update -qq >/dev/null 2>&1 \
        || skip "bookworm-backports' package lists could not be fetched from $mirror"
    rm -f "$CACHE"/debs/*.deb
    (cd "$CACHE/debs" && apt-get "${apt_private[@]}" download -qq \
        mesa-vulkan-drivers mesa-libgallium libdrm2 libdrm-amdgpu1 >/dev/null 2>&1) \
        || skip "Mesa's packages could not be downloaded from bookworm-backports"
    rm -rf "$CACHE/mesa.new"
    for deb in "$CACHE"/debs/*.deb; do dpkg-deb -x "$deb" "$CACHE/mesa.new"; done
    rm -rf "$CACHE/mesa" && mv "$CACHE/mesa.new" "$CACHE/mesa"
fi
ls "$CACHE"/debs/ 2>/dev/null | sed 's/^/   /'
not_found=$(LD_LIBRARY_PATH=$LIB ldd "$LIB/libvulkan_lvp.so" | grep 'not found')
[ -z "$not_found" ] || skip "lavapipe needs libraries that are not installed: $not_found"
printf '{"file_format_version": "1.0.1", "ICD": {"library_path": "%s", "api_version": "1.3.0"}}\n' \
    "$LIB/libvulkan_lvp.so" >"$CACHE/lavapipe.json"
export VK_DRIVER_FILES=$CACHE/lavapipe.json VK_ICD_FILENAMES=$CACHE/lavapipe.json
export LD_LIBRARY_PATH=$LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
vulkan=$(vulkaninfo 2>/dev/null)
grep -q 'deviceName.*llvmpipe' <<<"$vulkan" || skip "vulkaninfo finds no lavapipe device"
grep -q VK_EXT_descriptor_indexing <<<"$vulkan" \
    || skip "this lavapipe lacks VK_EXT_descriptor_indexing, which vkd3d needs for DirectML"
echo "   $(grep -m1 'driverInfo' <<<"$vulkan" | sed 's/^[[:space:]]*//')"
done_step

# ---------------------------------------------------------------------------------------------
step "Rust target $TARGET"
if ! rustup target list --installed 2>/dev/null | grep -qx "$TARGET"; then
    rustup target add "$TARGET" >/dev/null 2>&1 \
        || skip "rustup could not install the $TARGET standard library (no access to its server?)"
fi
echo "   installed"
done_step

# ---------------------------------------------------------------------------------------------
step "build tjoin.exe and the test binaries for Windows (--features directml)"
# One debug build serves both: the integration tests run target/$TARGET/debug/tjoin.exe,
# and debug builds check every integer operation for overflow.
build_log=$WORK/build.log
cargo test --features directml --target "$TARGET" --no-run --message-format short \
    >"$build_log" 2>&1 || { tail -30 "$build_log"; fail "the Windows build failed"; }
# "Executable unittests src/lib.rs (target/x86_64-pc-windows-gnu/debug/deps/tjoin-HASH.exe)"
mapfile -t TESTS < <(sed -n 's/.*Executable .*(\(.*\.exe\))$/\1/p' "$build_log" \
    | sed "s|^\([^/]\)|$ROOT/\1|")
[ ${#TESTS[@]} -gt 0 ] || fail "the build names no test binaries"
BIN=$(dirname "$(dirname "${TESTS[0]}")")
EXE=$BIN/tjoin.exe
[ -f "$EXE" ] || fail "the build left no $EXE"
WINDOWS_BUILT=1
# examples/dml_compare.rs: the DirectML-versus-CPU comparisons, in one process.
COMPARE=$BIN/examples/dml_compare.exe
[ -f "$COMPARE" ] || fail "the build left no $COMPARE"
# examples/dml_split_compare.rs: DirectML's Split against a CPU split, in one process.
SPLIT_COMPARE=$BIN/examples/dml_split_compare.exe
[ -f "$SPLIT_COMPARE" ] || fail "the build left no $SPLIT_COMPARE"
echo "   $EXE, $COMPARE, $SPLIT_COMPARE and ${#TESTS[@]} test binaries"
done_step

# ---------------------------------------------------------------------------------------------
step "DirectML.dll from the onnxruntime-directml wheel on PyPI"
WHEEL_VERSION=1.24.4
DLL=$CACHE/DirectML-$WHEEL_VERSION.dll
if [ ! -f "$DLL" ]; then
    command -v python3 >/dev/null || skip "python3 (for pip, to download the wheel) is missing"
    rm -rf "$CACHE/wheel"
    python3 -m pip download -q --no-deps --only-binary=:all: --platform win_amd64 \
        --python-version 3.11 -d "$CACHE/wheel" "onnxruntime-directml==$WHEEL_VERSION" \
        >/dev/null 2>&1 || skip "pip could not download onnxruntime-directml $WHEEL_VERSION"
    unzip -q -o -j "$CACHE"/wheel/*.whl onnxruntime/capi/DirectML.dll -d "$CACHE/wheel" \
        || skip "the wheel holds no onnxruntime/capi/DirectML.dll"
    mv "$CACHE/wheel/DirectML.dll" "$DLL"
    rm -rf "$CACHE/wheel"
fi
echo "   $(stat -c %s "$DLL") bytes"
done_step

# ---------------------------------------------------------------------------------------------
step "the Wine shim (.ci/wine-shim.c) and the folders tjoin.exe runs from"
SHIM=$WORK/bcryptprimitives.dll
x86_64-w64-mingw32-gcc -O2 -shared -s -o "$SHIM" .ci/wine-shim.c -ladvapi32 \
    || fail "the shim does not build"
# .ci/wine-desktop.c: holds Wine's desktop process for the whole run (see the step below).
DESKTOP=$WORK/desktop.exe
x86_64-w64-mingw32-gcc -O2 -s -o "$DESKTOP" .ci/wine-desktop.c -luser32 \
    || fail "the desktop keeper does not build"
# With DirectML.dll beside it, as DirectML's redistributable is installed; and without.
WITH=$WORK/with-directml
WITHOUT=$WORK/without-directml
rm -rf "$WITH" "$WITHOUT"
mkdir -p "$WITH" "$WITHOUT"
cp "$EXE" "$COMPARE" "$SPLIT_COMPARE" "$SHIM" "$WITH/" && cp "$DLL" "$WITH/DirectML.dll"
cp "$EXE" "$SHIM" "$WITHOUT/"
# The test binaries run from their own folder, and the integration tests start tjoin.exe.
cp "$SHIM" "$BIN/deps/" && cp "$SHIM" "$BIN/"
cp "$DLL" "$BIN/deps/DirectML.dll" && cp "$DLL" "$BIN/DirectML.dll"
done_step

# ---------------------------------------------------------------------------------------------
step "a virtual display and the Wine prefix ($CACHE/prefix)"
exec 3>"$WORK/display"
Xvfb -displayfd 3 -screen 0 640x480x24 -nolisten tcp >"$WORK/xvfb.log" 2>&1 &
XVFB=$!
exec 3>&-
trap 'kill $XVFB 2>/dev/null' EXIT
for _ in $(seq 50); do [ -s "$WORK/display" ] && break; sleep 0.1; done
[ -s "$WORK/display" ] || skip "Xvfb did not start: $(tail -2 "$WORK/xvfb.log")"
DISPLAY=:$(cat "$WORK/display")
export DISPLAY
export WINEPREFIX=$CACHE/prefix WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
# One run at a time in the prefix: this one ends its Wine server when done.
exec 9>"$CACHE/prefix.lock"
flock 9
trap 'wineserver -k 2>/dev/null; kill $XVFB 2>/dev/null' EXIT
# A server left by a run that was killed would still use that run's display.
wineserver -k 2>/dev/null
if [ ! -f "$WINEPREFIX/.tjoin-ready" ]; then
    rm -rf "$WINEPREFIX"
    wineboot --init >/dev/null 2>&1 </dev/null
    # Direct3D 12 through Vulkan (vkd3d), and no debugger to hang on a crash.
    wine reg add 'HKCU\Software\Wine\Direct3D' /v renderer /t REG_SZ /d vulkan /f \
        >/dev/null 2>&1 </dev/null \
        && wine reg add 'HKLM\Software\Microsoft\Windows NT\CurrentVersion\AeDebug' \
            /v Debugger /t REG_SZ /d '' /f >/dev/null 2>&1 </dev/null \
        && wineserver -w && touch "$WINEPREFIX/.tjoin-ready"
fi
[ -f "$WINEPREFIX/.tjoin-ready" ] || skip "wineboot could not make a Wine prefix"
# Keep the server up between the runs below.
wineserver -p 2>/dev/null
# Start Wine's desktop process (explorer.exe) now, with no standard handles, and keep it for
# the whole run: started by the first Direct3D program, it inherits that program's handles,
# and a pipe it holds open keeps whoever reads the pipe (the integration tests' tjoin runs)
# waiting for its end forever. Wine ends it a second after the last program exits, so a
# started-once explorer.exe is gone by the integration tests; desktop.exe holds it.
wine "$DESKTOP" </dev/null >/dev/null 2>&1 &
desktop_up() { grep -qsa 'explorer\.exe' /proc/[0-9]*/cmdline; }
for _ in $(seq 100); do desktop_up && break; sleep 0.1; done
desktop_up || fail "Wine's desktop process (explorer.exe) did not start"
done_step


#!/usr/bin/env bash
# CI stage directml-wine, which .ci/run starts in the background (.ci/README.md). Runs tjoin's
# DirectML backend for real on Linux, without a GPU: the Windows build of tjoin
# (x86_64-pc-windows-gnu, --features directml) under Wine, whose Direct3D 12 (vkd3d) runs on
# lavapipe, Mesa's software Vulkan device. Every DirectML output is compared byte for byte
# with the CPU engine's output of the same Windows build: tjoin.exe for the command line's
# own checks, and examples/dml_compare.rs for the worked and random joins, each case through
# both engines in one process (a Wine start costs a second or more); examples/dml_split_compare.rs
# likewise for DirectML's Split against a CPU split of the same bytes.
#
#   .ci/directml-wine.sh
#
# Written for Debian 12 (bookworm) on x86_64, as root, like the rest of CI. It installs
# Debian's packages (mingw, Wine 8.0, Xvfb, the Vulkan loader) with apt-get, and nothing else
# into the system: lavapipe comes from bookworm-backports' Mesa 25 unpacked into the cache
# folder (Mesa 22.3's lavapipe lacks descriptor indexing, without which vkd3d drops
# DirectML's descriptor tables and the outputs stay unwritten), and DirectML.dll from the
# onnxruntime-directml Windows wheel on PyPI. Downloads and the Wine prefix are kept in
# $TJOIN_WINE_CACHE (default ~/.cache/tjoin-directml-wine); builds go to target/.
#
# When the environment cannot be set up (no root, a package, the Rust target or the wheel
# unobtainable), it prints a line starting with SKIPPED and the reason, and exits 0. Any
# difference between the engines, or any failure of the backend, exits 1.
#
# TJOIN_WINE_HUGE=1 also runs a join of more than 2^32 elements (about 4.3 GB of uint8
# in, twice that out on disk, minutes): too long for CI.
#
# The environment (packages, lavapipe, the Windows build, DirectML.dll, the shim, the display
# and the Wine prefix) is set up by .ci/wine/setup.sh; this file runs the checks in it.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=.ci/wine/setup.sh
source .ci/wine/setup.sh
# ---------------------------------------------------------------------------------------------
PASSED=0
FAILED=0
pass() {
    PASSED=$((PASSED + 1))
    echo "ok    $*"
}
differ() {
    FAILED=$((FAILED + 1))
    echo "FAIL  $*"
}
# tjoin DIR ARGS...: runs DIR/tjoin.exe under Wine; its output on stdout, its errors in $ERR.
# On a busy machine Wine's server may SIGKILL a process whose threads take over a second to
# end once it exits (status 137): such a run is tried once more.
ERR=$WORK/stderr
RETRIED=0
tjoin() {
    local dir=$1 status
    shift
    timeout 600 wine "$dir/tjoin.exe" "$@" </dev/null 2>"$ERR"
    status=$?
    if [ $status = 137 ]; then
        RETRIED=$((RETRIED + 1))
        echo "      (killed at status 137, tried again: tjoin.exe $*)" >&2
        timeout 600 wine "$dir/tjoin.exe" "$@" </dev/null 2>"$ERR"
        status=$?
    fi
    return $status
}

# fails STATUS PATTERN WHAT DIR ARGS...: passes when tjoin exits STATUS with PATTERN (an
# extended regular expression) in what it prints on stderr, which is shown.
fails() {
    local want=$1 pattern=$2 what=$3 status
    shift 3
    tjoin "$@" >/dev/null
    status=$?
    if [ $status = "$want" ] && grep -qzE -- "$pattern" "$ERR"; then
        pass "$what"
    else
        differ "$what: it exited $status"
    fi
    sed 's/^/      /' "$ERR"
}

step "what tjoin.exe imports, and a Windows without DirectML.dll"
imports=$(x86_64-w64-mingw32-objdump -p "$EXE" | sed -n 's/.*DLL Name: //p' | sort -fu)
echo "   imports:" $imports
if grep -qiE '^(d3d12|dxgi|directml)\.dll$' <<<"$imports"; then
    differ "tjoin.exe imports a library only the DirectML backend needs"
else
    pass "tjoin.exe imports neither dxgi.dll, d3d12.dll nor DirectML.dll"
fi
F=$ROOT/fixtures/npy/dml_ex1_axis3
out=$WORK/out
mkdir -p "$out"
if tjoin "$WITHOUT" --backend cpu -a 3 "$F/in0.npy" "$F/in1.npy" -o "$out/cpu.npy" \
    && cmp -s "$out/cpu.npy" "$F/expected.npy"; then
    pass "without DirectML.dll, --backend cpu writes the expected output"
else
    differ "without DirectML.dll, --backend cpu fails: $(cat "$ERR")"
fi
fails 1 'DirectML.dll could not be loaded.*Microsoft.AI.DirectML' \
    "without DirectML.dll, --backend directml exits 1 naming it and where to get it" \
    "$WITHOUT" --backend directml -a 3 "$F/in0.npy" "$F/in1.npy" -o "$out/dml.npy"
[ ! -e "$out/dml.npy" ] || differ "without DirectML.dll, --backend directml wrote an output"
if tjoin "$WITHOUT" --backend auto --dry-run -a 3 "$F/in0.npy" "$F/in1.npy" >"$out/dry.txt" \
    && grep -q '^backend: cpu, as --backend auto chose: DirectML is unavailable: DirectML.dll' \
        "$out/dry.txt"; then
    pass "without DirectML.dll, --backend auto falls back to the CPU engine and says why"
else
    differ "without DirectML.dll, --backend auto: $(cat "$out/dry.txt" "$ERR")"
fi
done_step

step "the adapters Wine offers"
if tjoin "$WITH" --backend auto --dry-run -a 3 "$F/in0.npy" "$F/in1.npy" >"$out/dry.txt" \
    && grep -q '^backend: DirectML on llvmpipe' "$out/dry.txt" \
    && grep -q '^directml: FLOAT32 {1,1,2,3} + {1,1,2,4} -> {1,1,2,7} on axis 3' "$out/dry.txt"
then
    pass "--backend auto --dry-run chooses DirectML on lavapipe and shows its plan"
    grep -E '^(backend|directml):' "$out/dry.txt" | sed 's/^/      /'
else
    differ "--backend auto did not choose DirectML: $(cat "$out/dry.txt" "$ERR")"
fi
if tjoin "$WITH" --backend directml --dml-adapter 0 --dry-run -a 3 "$F/in0.npy" "$F/in1.npy" \
    >"$out/dry.txt" && grep -q 'llvmpipe.*(adapter 0)' "$out/dry.txt"; then
    pass "--dml-adapter 0 is lavapipe"
else
    differ "--dml-adapter 0: $(cat "$out/dry.txt" "$ERR")"
fi
fails 1 'there is no adapter 1: DXGI lists 1' "--dml-adapter 1 exits 1" \
    "$WITH" --backend directml --dml-adapter 1 --dry-run -a 3 "$F/in0.npy" "$F/in1.npy"
# Wine has no WARP (EnumWarpAdapter answers E_NOTIMPL): it must fail cleanly.
fails 1 'EnumWarpAdapter failed' "--dml-adapter warp exits 1 where there is no WARP" \
    "$WITH" --backend directml --dml-adapter warp --dry-run -a 3 "$F/in0.npy" "$F/in1.npy"
done_step

# compare [--suffix TEXT] CASE_DIR...: joins each case's inputs with the arguments in its
# args.txt through DirectML and through the CPU engine, in one Windows process
# (examples/dml_compare.rs, one Wine start for all the cases), and compares the outputs.
# $CASES counts the joins compared.
compare() {
    compare_run "$WORK/compare.log" "$out" "$@"
    compare_check "$WORK/compare.log" "$@"
}
# compare_run LOG OUT_DIR ARGS...: runs dml_compare.exe, writing into OUT_DIR, what it
# prints in LOG and its exit status in LOG.status; it may run in the background (as two do,
# below, side by side, each with its own LOG and OUT_DIR).
compare_run() {
    local log=$1 dir=$2 status
    shift 2
    rm -f "$log.status" "$log.retried"
    (cd "$WITH" && timeout 1800 wine "$WITH/dml_compare.exe" "$dir" "$@" </dev/null >"$log" 2>&1)
    status=$?
    # As for tjoin above: Wine's server may SIGKILL a process that is slow to end. Killed
    # before its summary, it runs once more; killed after it, its results stand.
    if [ $status = 137 ] && ! grep -q '^dml_compare: cases' "$log"; then
        echo "      (killed at status 137, tried again: dml_compare.exe $*)" >"$log.retried"
        (cd "$WITH" && timeout 1800 wine "$WITH/dml_compare.exe" "$dir" "$@" </dev/null >"$log" 2>&1)
        status=$?
    fi
    echo $status >"$log.status"
}
# compare_check LOG ARGS...: what compare_run's LOG says, counted.
compare_check() {
    local log=$1 summary status
    shift
    status=$(cat "$log.status" 2>/dev/null || echo lost)
    if [ -f "$log.retried" ]; then
        RETRIED=$((RETRIED + 1))
        cat "$log.retried" >&2
    fi
    summary=$(sed -n 's/^dml_compare: cases [0-9]* ok [0-9]* failed, joins \([0-9]*\)$/\1/p' "$log")
    grep -v '^dml_compare: ' "$log"
    PASSED=$((PASSED + $(grep -c '^ok ' "$log")))
    FAILED=$((FAILED + $(grep -c '^FAIL ' "$log")))
    if [ -z "$summary" ]; then
        differ "dml_compare.exe $* exited $status before its summary"
    elif [ "$status" != 0 ] && [ "$status" != 137 ] && ! grep -q '^FAIL ' "$log"; then
        differ "dml_compare.exe $* exited $status"
    else
        CASES=$((CASES + summary))
    fi
}
CASES=0

step "the worked examples (fixtures/npy/dml_*)"
compare "$ROOT"/fixtures/npy/dml_*
done_step

step "random joins (examples/join_cases.rs) at the adapter's buffer budget and at 4 KiB (most then take several dispatches), side by side"
cargo run -q --example join_cases -- "$WORK/cases" 17 || fail "examples/join_cases failed"
small=()
large=()
for d in "$WORK"/cases/*; do
    case $d in *large_*) large+=("$d") ;; *) small+=("$d") ;; esac
done
# Two Windows processes at once: each waits on Wine and lavapipe about a third of its time,
# and one after the other they were 40% of this script's time (73 s and 61 s).
mkdir -p "$out/budget"
compare_run "$WORK/compare.log" "$out" "$WORK"/cases/* &
whole=$!
TJOIN_DML_BUFFER_BUDGET=4096 compare_run "$WORK/compare-4k.log" "$out/budget" \
    --suffix "(4 KiB budget)" "${small[@]}" &
budget=$!
wait $whole $budget
compare_check "$WORK/compare.log" "$WORK"/cases/*
compare_check "$WORK/compare-4k.log" --suffix "(4 KiB budget)" "${small[@]}"
TJOIN_DML_BUFFER_BUDGET=$((4 << 20)) compare --suffix "(4 MiB budget)" "${large[@]}"
done_step

# split_compare SEED CASES [--suffix TEXT]: splits CASES random tensors (from SEED) through
# DirectML's Split and through a plain CPU split in one Windows process
# (examples/dml_split_compare.rs), comparing every part. $SPLITS counts the splits compared.
split_compare() {
    local log=$WORK/split_compare.log summary status
    (cd "$WITH" && timeout 1800 wine "$WITH/dml_split_compare.exe" "$@" </dev/null >"$log" 2>&1)
    status=$?
    summary=$(sed -n 's/^dml_split_compare: cases [0-9]* ok [0-9]* failed, splits \([0-9]*\)$/\1/p' "$log")
    if [ $status = 137 ] && [ -z "$summary" ]; then
        RETRIED=$((RETRIED + 1))
        echo "      (killed at status 137, tried again: dml_split_compare.exe $*)" >&2
        (cd "$WITH" && timeout 1800 wine "$WITH/dml_split_compare.exe" "$@" </dev/null >"$log" 2>&1)
        status=$?
        summary=$(sed -n 's/^dml_split_compare: cases [0-9]* ok [0-9]* failed, splits \([0-9]*\)$/\1/p' "$log")
    fi
    grep -v '^dml_split_compare: ' "$log"
    PASSED=$((PASSED + $(grep -c '^ok ' "$log")))
    FAILED=$((FAILED + $(grep -c '^FAIL ' "$log")))
    if [ -z "$summary" ]; then
        differ "dml_split_compare.exe $* exited $status before its summary"
    elif [ $status != 0 ] && [ $status != 137 ] && ! grep -q '^FAIL ' "$log"; then
        differ "dml_split_compare.exe $* exited $status"
    else
        SPLITS=$((SPLITS + summary))
    fi
}
SPLITS=0

step "random splits through DirectML's Split (examples/dml_split_compare.rs)"
split_compare 17 120
TJOIN_DML_BUFFER_BUDGET=4096 split_compare 17 120 --suffix "(4 KiB budget)"
done_step

if [ "${TJOIN_WINE_HUGE:-}" = 1 ]; then
    step "a join of more than 2^32 elements (TJOIN_WINE_HUGE=1)"
    huge=$WORK/huge
    mkdir -p "$huge"
    cargo run -q --example join_cases -- --huge "$huge" || fail "examples/join_cases failed"
    compare "$huge"
    rm -rf "$huge" "$out"/dml.* "$out"/cpu.*
    done_step
fi

step "the Windows test binaries under Wine"
# Of the integration tests, DirectML's and those of files in use (an output replacing an
# input, concurrent writers, a truncated input), where Windows differs from Unix. The drift
# check of the bindings runs cargo, which Wine does not have: it runs on Linux.
#
# They run the tjoin.exe copied beside DirectML.dll after the build (TJOIN_TEST_BIN), not the
# build's own: CI's wheel-windows stage builds the same profile into the same folder while
# these run, and cargo's relink of target/.../debug/tjoin.exe left the tests nothing to start
# ("Failed to spawn ... File not found": the failure of 2026-11-27).
export TJOIN_TEST_DML_ADAPTER=default TJOIN_TEST_BIN=$WITH/tjoin.exe
# shows LOG's failed tests, each with what it printed (its panic message), up to the list
# of failures libtest prints last.
show_failures() {
    grep -E '^test .* \.\.\. FAILED$' "$1" | head -10 | sed 's/^/      /'
    awk '/^---- /{on=1} /^failures:$/{on=0} on' "$1" | head -60 | sed 's/^/      /'
}
filter_of() {
    case $(basename "$1") in
        integration-*) echo "directml:: files_in_use:: --skip generated_bindings_are_current" ;;
    esac
}
# The binaries run side by side (by now the Linux stages are ending, and one Wine process
# keeps about one core busy), each with its log and its exit status in a file.
# (Only these are waited for: Xvfb and Wine's desktop process run in the background too.)
runs=()
for t in "${TESTS[@]}"; do
    log=$WORK/$(basename "$t" .exe).log
    read -ra filter <<<"$(filter_of "$t")"
    rm -f "$log.status"
    (cd "$BIN/deps" && timeout 900 wine "$t" "${filter[@]}" </dev/null >"$log" 2>&1
        echo $? >"$log.status") &
    runs+=($!)
done
wait "${runs[@]}"
for t in "${TESTS[@]}"; do
    log=$WORK/$(basename "$t" .exe).log
    read -ra filter <<<"$(filter_of "$t")"
    status=$(cat "$log.status" 2>/dev/null || echo lost)
    summary=$(grep '^test result' "$log" | tail -1)
    # Wine on a busy machine may fail to start a process ("Failed to spawn ... Internal
    # error. (os error 1359)", seen once, 2026-11-27). A test whose every failure is such a
    # start (one or two tests) runs once more on its own, its first failure shown: a process
    # that never started wrote nothing to compare. Any other failure is never tried again.
    mapfile -t failed < <(sed -n 's/^test \(.*\) \.\.\. FAILED$/\1/p' "$log")
    if [ "$status" != 0 ] && [ -n "$summary" ] && [ ${#failed[@]} -ge 1 ] \
        && [ ${#failed[@]} -le 2 ] && ! grep -q ' differ' "$log" \
        && [ "$(grep -c '^thread .* panicked at' "$log")" = "$(grep -c 'Failed to spawn' "$log")" ]; then
        echo "      could not start a process, tried again on its own: ${failed[*]}"
        show_failures "$log"
        RETRIED=$((RETRIED + 1))
        (cd "$BIN/deps" && timeout 900 wine "$t" --exact "${failed[@]}" </dev/null >"$log.again" 2>&1)
        status=$?
        summary="$(grep '^test result' "$log.again" | tail -1) (tried again: ${failed[*]})"
        log=$log.again
    fi
    if [ "$status" = 0 ] && [ -n "$summary" ]; then
        pass "$(basename "$t") ${filter[*]}: $summary"
    else
        differ "$(basename "$t") ${filter[*]} exited $status: ${summary:-no summary}"
        show_failures "$log"
    fi
done
done_step

rm -rf "$out" "$WORK/cases"
echo "directml-wine: $CASES joins and $SPLITS splits compared byte for byte, in $(($(date +%s) - TOTAL_START)) s;" \
    "$RETRIED runs Wine killed or could not start, tried again"
echo "directml-wine: $PASSED passed, $FAILED failed"
[ $FAILED = 0 ]

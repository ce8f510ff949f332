#!/usr/bin/env bash
# CI stage wheel-installed: the Linux wheel (.ci/wheel-linux.sh) installed into a fresh virtual
# environment without the network, as a user installs it: its commands, man page and
# completions; its Python module's tests (python/tests/); and a smoke subset of the
# integration suite run against the tjoin it installed. The whole suite ran in the test stage
# against the same source: here only what the wheel's own build (static musl, the wheel-ci
# profile) and installation could change is run again.
source "$(dirname "$0")/lib.sh"

# The integration tests run against the installed tjoin (TJOIN_TEST_BIN, tests/integration/
# util.rs): each filter names a module of tests/integration/, and each must match a test.
# README.md's commands as a reader runs them (examples), the committed fixtures' outputs
# (fixtures), pipes and standard streams (pipelines), output files' safety (output_safety), a
# split (split) and a sharded set committed together (sharded_commit).
SMOKE=(examples:: fixtures:: pipelines:: output_safety:: split:: sharded_commit::)

VENV=$WHEELS/venv
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --no-index "$WHEELS"/linux/tjoin-*.whl
# Dask's scheduler, for tjoin.join(workers=N, executor=client) (python/tests/test_workers.py):
# from PyPI, pinned. Ray (a wheel of hundreds of MB) is not installed: its test is skipped here
# and was run by hand (see python/tests/test_workers.py).
"$VENV/bin/pip" install -q dask==2026.8.0 distributed==2026.8.0
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
said=$("$VENV/bin/tjoin" --version)
echo "   $said"
[ "$said" = "tjoin $version" ]
help=$("$VENV/bin/python" -m tjoin --help)
grep -q '^Usage: tjoin' <<<"$help"
[ "$("$VENV/bin/python" -c 'import tjoin; print(tjoin.find_tjoin_bin())')" = "$VENV/bin/tjoin" ]
for f in share/man/man1/tjoin.1 share/bash-completion/completions/tjoin \
    share/zsh/site-functions/_tjoin share/fish/vendor_completions.d/tjoin.fish; do
    cmp "$VENV/$f" "python/tjoin.data/data/$f"
done
echo "   tjoin --version, python -m tjoin --help, find_tjoin_bin(), the man page and completions: ok"

# The Python module as the wheel installed it (python/tests/: each function, a refusal, the
# options, __version__, README.md's "From Python" examples), run by the environment's Python
# with an empty PATH (no Rust, no other tjoin) by the standard library's unittest, whose
# summary (`Ran N tests`, then OK) must count at least one test.
mkdir -p "$WHEELS/empty-path"
env PATH="$WHEELS/empty-path" "$VENV/bin/python" -m unittest discover -s python/tests -v 2>&1 \
    | tee "$WHEELS/python-tests.log"
ran=$(sed -n 's/^Ran \([0-9]*\) tests\{0,1\} in .*/\1/p' "$WHEELS/python-tests.log")
if [ "${ran:-0}" -lt 1 ] || ! grep -q '^OK' "$WHEELS/python-tests.log"; then
    echo "the Python module's tests ran no test, or did not pass"
    exit 1
fi
echo "   the Python module: $ran tests ok"

# A filter that matches nothing (a module renamed) would pass untried: each must list a test.
for filter in "${SMOKE[@]}"; do
    listed=$(cargo test -q --test integration -- --list "$filter" 2>/dev/null | grep -c ': test$' || true)
    if [ "$listed" -lt 1 ]; then
        echo "the smoke filter $filter matches no integration test: fix SMOKE in $0"
        exit 1
    fi
done
echo "   the integration suite's smoke subset against $VENV/bin/tjoin: ${SMOKE[*]}"
TJOIN_TEST_BIN=$VENV/bin/tjoin cargo test --test integration -- "${SMOKE[@]}"

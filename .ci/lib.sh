# What every CI stage file starts from (sourced, never run): the repository's root as the
# working folder, the settings every stage shares, and the few helpers more than one stage
# uses. `.ci/run` sources it too, so a stage run alone (`bash .ci/clippy.sh`) runs as it runs
# under `.ci/run`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# No debug info in CI's builds: nothing reads it, and it costs a fifth of the CPU time.
export CARGO_PROFILE_DEV_DEBUG=${CARGO_PROFILE_DEV_DEBUG:-0}
# Under CI every test runs: one that cannot run here (no root, bash or tmpfs) fails instead of
# passing untried (tests/integration/util.rs, `cannot_run`). CI services set CI=true already.
export CI=${CI:-true}
# One target folder outside the clone, kept between runs on the same machine, so that the
# dependencies build once per machine (a new machine builds everything) while the clone stays
# fresh. CARGO_TARGET_DIR, when set, wins.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${TJOIN_CI_TARGET:-${HOME:-/tmp}/.cache/tjoin-ci/target}}
mkdir -p "$CARGO_TARGET_DIR"

# What CI installs from PyPI (.ci/requirements.txt, installed by .ci/tools.sh) lives in one
# virtual environment in the target folder, first on every stage's PATH: its pinned commands
# win over any the system has, and its `python3` imports its packages.
export CI_TOOLS=$CARGO_TARGET_DIR/ci-tools
# Likewise what CI installs from the npm registry (.ci/package.json, pinned by its lock file):
# its commands (azurite-blob) are on every stage's PATH.
export CI_NPM=$CARGO_TARGET_DIR/ci-npm
for tools in "$CI_NPM/node_modules/.bin" "$CI_TOOLS/bin"; do
    case ":$PATH:" in
        *":$tools:"*) ;;
        *) export PATH=$tools:$PATH ;;
    esac
done
# The wheels, the sdist and the virtual environment the Linux wheel is installed into.
export WHEELS=$CARGO_TARGET_DIR/wheels

# readme_test_command: the command README.md gives for running the tests, the second line of
# its first code block (the first line runs the main job on the committed fixtures).
readme_test_command() {
    awk '/^```/ { if (inside) exit; inside = 1; next } inside' README.md | sed -n 2p
}

# show_wheel WHEEL: its tag, size and contents, in the log.
show_wheel() {
    echo "   $(basename "$1"): $(stat -c %s "$1") bytes, tag" \
        "$(unzip -p "$1" '*.dist-info/WHEEL' | sed -n 's/^Tag: //p' | paste -sd ' ')"
    python3 -m zipfile -l "$1" | sed 's/^/     /'
}

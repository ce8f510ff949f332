#!/usr/bin/env bash
# CI stage test: the command README.md gives for running the tests (the second of its two
# first commands), read from README.md itself, so that CI runs what a reader is told to run.
# The integration suite runs here once; the installed wheel's stage runs a smoke subset of it.
source "$(dirname "$0")/lib.sh"
command=$(readme_test_command)
case $command in
    "cargo test" | "cargo test "*) ;;
    *)
        echo "README.md's second command is '$command', not the tests (cargo test ...)"
        exit 1
        ;;
esac
echo "   README.md's test command: $command"
read -ra words <<<"$command"
"${words[@]}"

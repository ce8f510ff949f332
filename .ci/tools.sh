#!/usr/bin/env bash
# CI stage tools: what CI installs from PyPI, the tools of .ci/requirements.txt, into a virtual
# environment kept in the target folder ($CI_TOOLS), installed again only when that file has
# changed since. What else CI installs, and where: .ci/README.md.
source "$(dirname "$0")/lib.sh"
if ! cmp -s .ci/requirements.txt "$CI_TOOLS/requirements.txt"; then
    [ -x "$CI_TOOLS/bin/pip" ] || { rm -rf "$CI_TOOLS" && python3 -m venv "$CI_TOOLS"; }
    "$CI_TOOLS/bin/pip" install -q -r .ci/requirements.txt
    cp .ci/requirements.txt "$CI_TOOLS/requirements.txt"
    echo "   installed into $CI_TOOLS:" $(grep -v '^#' .ci/requirements.txt)
else
    echo "   already installed in $CI_TOOLS:" $(grep -v '^#' .ci/requirements.txt)
fi

#!/usr/bin/env bash
# CI stage tools: what CI installs from PyPI, the tools of .ci/requirements.txt, into a virtual
# environment kept in the target folder ($CI_TOOLS), and from the npm registry, the packages
# of .ci/package.json at the versions .ci/package-lock.json pins, into $CI_NPM; each installed
# again only when its file has changed since. What else CI installs, and where: .ci/README.md.
source "$(dirname "$0")/lib.sh"
if ! cmp -s .ci/requirements.txt "$CI_TOOLS/requirements.txt"; then
    [ -x "$CI_TOOLS/bin/pip" ] || { rm -rf "$CI_TOOLS" && python3 -m venv "$CI_TOOLS"; }
    "$CI_TOOLS/bin/pip" install -q -r .ci/requirements.txt
    cp .ci/requirements.txt "$CI_TOOLS/requirements.txt"
    echo "   installed into $CI_TOOLS:" $(grep -v '^#' .ci/requirements.txt)
else
    echo "   already installed in $CI_TOOLS:" $(grep -v '^#' .ci/requirements.txt)
fi
# npm ci installs exactly the lock file, and runs no package's install script; the lock is
# kept beside the install only once it has succeeded.
if ! cmp -s .ci/package-lock.json "$CI_NPM/installed-lock.json"; then
    rm -rf "$CI_NPM" && mkdir -p "$CI_NPM"
    cp .ci/package.json .ci/package-lock.json "$CI_NPM/"
    (cd "$CI_NPM" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
    cp .ci/package-lock.json "$CI_NPM/installed-lock.json"
    echo "   installed into $CI_NPM:" $(cd "$CI_NPM" && npm ls --depth=0 | tail -n +2)
else
    echo "   already installed in $CI_NPM:" $(cd "$CI_NPM" && npm ls --depth=0 | tail -n +2)
fi

"""``python -m tjoin ARGS``: runs the installed tjoin binary with ARGS, as ``tjoin ARGS``."""

from __future__ import annotations

import os
import sys

from tjoin import find_tjoin_bin


def _run() -> None:
    tjoin = find_tjoin_bin()
    if sys.platform == "win32":
        # Windows has no exec that keeps the process: wait for it and pass on its status.
        import subprocess

        sys.exit(subprocess.run([tjoin, *sys.argv[1:]]).returncode)
    # The binary takes this process's place: its status, signals and terminal are tjoin's own.
    os.execv(tjoin, [tjoin, *sys.argv[1:]])


if __name__ == "__main__":
    _run()

"""tjoin, the command-line tool, installed as a binary beside this package.

Call it as a command: ``subprocess.run([find_tjoin_bin(), "-a", "0", "a.npy", "b.npy",
"-o", "out.npy"], check=True)``. Its ``--dry-run=json`` prints the plan (or the refusal)
as one JSON object for a script to read. ``python -m tjoin ARGS`` runs it too.
"""

from __future__ import annotations

import os
import sys
import sysconfig

__all__ = ["find_tjoin_bin"]


def find_tjoin_bin() -> str:
    """The path of the tjoin binary this package was installed with.

    Looked for in the scripts folder of the install scheme that installed this package
    (a virtual environment's ``bin``, the system's, or the user's with ``pip install --user``),
    then beside a ``pip install --target`` folder. Raises ``FileNotFoundError`` naming every
    place looked at when it is in none of them.
    """
    exe = "tjoin" + (sysconfig.get_config_var("EXE") or "")
    here = os.path.dirname(os.path.abspath(__file__))
    places = []

    # The scheme whose purelib or platlib holds this package scripts its binary.
    schemes = [None]  # the default scheme of this interpreter
    if sys.version_info >= (3, 10):
        schemes.append(sysconfig.get_preferred_scheme("user"))
    elif os.name == "nt":
        schemes.append("nt_user")
    elif sys.platform == "darwin" and sys._framework:  # type: ignore[attr-defined]
        schemes.append("osx_framework_user")
    else:
        schemes.append("posix_user")
    for scheme in schemes:
        try:
            paths = sysconfig.get_paths() if scheme is None else sysconfig.get_paths(scheme)
        except KeyError:
            continue
        places.append(paths["scripts"])

    # `pip install --target DIR` puts the package in DIR and the binary in DIR/bin.
    places.append(os.path.join(os.path.dirname(here), "bin"))

    for folder in places:
        candidate = os.path.join(folder, exe)
        if os.path.isfile(candidate):
            return candidate
    raise FileNotFoundError(
        "the tjoin binary is not where pip installs it; looked in: " + ", ".join(places)
    )

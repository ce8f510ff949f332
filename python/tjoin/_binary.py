"""Where the tjoin binary installed with this package is: ``find_tjoin_bin()``."""

from __future__ import annotations

import os
import sys
import sysconfig


def _user_scheme() -> str:
    if sys.version_info >= (3, 10):
        return sysconfig.get_preferred_scheme("user")
    if os.name == "nt":
        return "nt_user"
    if sys.platform == "darwin" and getattr(sys, "_framework", None):
        return "osx_framework_user"
    return "posix_user"


def find_tjoin_bin() -> str:
    """The path of the tjoin binary that was installed with this package.

    pip puts it in the scripts folder of the install scheme that holds this package: a
    virtual environment's ``bin`` (``Scripts`` on Windows), the system's, or the user's with
    ``pip install --user``; with ``pip install --target DIR``, in ``DIR/bin``. The scheme
    whose library folder holds this package is looked at first, so that another tjoin on
    PATH or in another scheme is not taken for it. Raises ``FileNotFoundError`` naming every
    folder looked in when the binary is in none of them.

    >>> tjoin.find_tjoin_bin()  # doctest: +ELLIPSIS
    '/.../bin/tjoin'
    """
    exe = "tjoin" + (sysconfig.get_config_var("EXE") or "")
    package = os.path.dirname(os.path.abspath(__file__))
    package_parent = os.path.dirname(package)
    ours: list[str] = []
    others: list[str] = []
    for scheme in (None, _user_scheme()):
        try:
            paths = sysconfig.get_paths() if scheme is None else sysconfig.get_paths(scheme)
        except KeyError:
            continue
        libraries = {os.path.normcase(os.path.abspath(paths[key])) for key in ("purelib", "platlib")}
        mine = os.path.normcase(package_parent) in libraries
        (ours if mine else others).append(paths["scripts"])
    # `pip install --target DIR` puts the package in DIR and the binary in DIR/bin.
    places = ours + [os.path.join(package_parent, "bin")] + others
    for folder in places:
        candidate = os.path.join(folder, exe)
        if os.path.isfile(candidate):
            return candidate
    raise FileNotFoundError(
        "the tjoin binary is not where pip installs it; looked in: " + ", ".join(places)
    )

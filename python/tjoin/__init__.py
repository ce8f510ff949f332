"""tjoin from Python: join and split tensors in files, by the tjoin binary installed with this
package (never another tjoin on PATH).

``tjoin.join(inputs, output, axis=None, **options)`` joins, ``tjoin.split(input, output, axis,
parts=, sizes=, ranks=, **options)`` splits, and ``tjoin.plan(inputs, output=None, axis=None,
**options)`` checks a join and returns its plan, writing nothing; each returns the plan as a
dict (``tjoin --dry-run=json``'s), for what was written. ``options`` are tjoin's long flags with
underscores: ``no_clobber=True``, ``cast="bfloat16"``, ``keep=["*norm*"]``. A refusal raises
``tjoin.TjoinError`` (``.refusal``, ``.exit_code``); an option tjoin does not have raises
``TypeError`` before anything runs. Progress is not shown unless asked for (``progress=True``).

>>> import tjoin
>>> tjoin.join(["x.npy", "y.npy"], "xy.npy", axis=0)["output"]["path"]
'xy.npy'

The command itself: ``python -m tjoin ARGS`` runs it as ``tjoin ARGS``, and
``find_tjoin_bin()`` gives its path, for ``subprocess.run([tjoin.find_tjoin_bin(), ...])``.
"""

from tjoin._api import StrPath, TjoinError, join, plan, split
from tjoin._binary import find_tjoin_bin
from tjoin._flags import VERSION as __version__

__all__ = ["TjoinError", "StrPath", "find_tjoin_bin", "join", "plan", "split", "__version__"]

# Named as the user names them (tracebacks say tjoin.TjoinError, help() and doctest find them
# here).
for _public in (TjoinError, find_tjoin_bin, join, plan, split):
    _public.__module__ = __name__
del _public

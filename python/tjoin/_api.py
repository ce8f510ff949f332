"""``tjoin.join``, ``tjoin.split`` and ``tjoin.plan``: tjoin's commands run by the binary
installed with this package, their plans returned as dicts, their refusals raised as
``TjoinError``.

Each call runs the binary once, with ``--print-plan=json`` (``--dry-run=json`` for ``plan``):
tjoin prints on stdout, as one JSON object, the plan it carried out, or the refusal. The
keyword arguments are tjoin's long flags with underscores (``_flags.py``, generated from
tjoin's own definition of them), turned into its words before anything runs.
"""

from __future__ import annotations

import concurrent.futures
import difflib
import json
import os
import signal
import subprocess
import sys
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from tjoin import _flags
from tjoin._binary import find_tjoin_bin

#: A path: a ``str`` or a path-like object such as ``pathlib.Path``.
StrPath = Union[str, "os.PathLike[str]"]

# The flags each function sets itself (from its parameters, or always), which are not
# keyword arguments of its own.
_SET_BY_JOIN = (
    "output",
    "axis",
    "dry_run",
    "print_plan",
    "progress",
    "workers",
    "worker",
    "begin",
    "commit",
    "abandon",
)
_SET_BY_SPLIT = ("output", "axis", "parts", "sizes", "ranks", "dry_run", "print_plan", "progress")
# A job of several workers runs from the functions' workers= and executor=.
_SET_BY_SPLIT += ("workers", "worker", "begin", "commit", "abandon")


class TjoinError(Exception):
    """tjoin refused the job, or failed while doing it; nothing was written.

    ``str(error)`` is tjoin's one-line message (the first refusal's headline, with a count of
    the others); ``error.refusal`` is the refusal as tjoin prints it in JSON, a dict with
    ``exit_code`` and ``refusals``, each refusal with its ``headline``, ``details`` (the lines
    about the inputs) and ``hint`` (``None`` when tjoin ended without saying why: a signal);
    ``error.exit_code`` is tjoin's exit status: 2 for a refusal or a usage mistake, 1 for a
    failure while reading or writing, negative for a signal. ``error.stderr`` holds what tjoin
    printed on stderr (``None`` with ``progress=True``, which shows it as it comes).

    >>> try:
    ...     tjoin.join(["a.npy", "x.npy"], "out.npy", axis=0)
    ... except tjoin.TjoinError as error:
    ...     print(error.exit_code, error.refusal["refusals"][0]["details"][2].strip())
    2 ^ rank 2 != 4
    """

    def __init__(
        self,
        message: str,
        refusal: Optional[Dict[str, Any]],
        exit_code: int,
        stderr: Optional[str] = None,
    ) -> None:
        super().__init__(message)
        self.refusal = refusal
        self.exit_code = exit_code
        self.stderr = stderr

    def __reduce__(self) -> Tuple[Any, ...]:
        # Whole across processes (a pool's worker raising it), not only its message.
        return (type(self), (str(self), self.refusal, self.exit_code, self.stderr))


def join(
    inputs: Union[StrPath, Sequence[StrPath]],
    output: Optional[StrPath],
    axis: Optional[int] = None,
    *,
    progress: bool = False,
    workers: Optional[int] = None,
    executor: Any = None,
    **options: Any,
) -> Dict[str, Any]:
    """Join ``inputs`` along ``axis`` into ``output``; return the plan that was carried out.

    ``inputs`` are paths (``FILE:NAME`` for one tensor of a file, a folder or an index for a
    sharded checkpoint); ``axis`` may be left out with one input, or when rules decide every
    tensor. ``options`` are tjoin's long flags with underscores: ``True`` for a flag without
    a value (``no_clobber=True``), a value for one with a value (``cast="bfloat16"``), a list
    for a repeatable one (``keep=["*norm*"]``; a dict gives ``KEY=VALUE`` items:
    ``metadata={"format": "pt"}``). ``output`` is ``None`` only with ``append=True``, which
    grows the first input in place. ``progress=True`` shows tjoin's progress bar on stderr.

    Returns what ``plan`` returns, for what was written. Raises ``TjoinError`` when tjoin
    refuses or fails (and the output is then left as it was), and ``TypeError`` for an option
    tjoin does not have, before anything runs.

    ``workers=N`` runs the join as a job of N workers (``tjoin --workers N --begin``, then
    ``--worker I/N`` for each I at once, then ``--workers N --commit``), the workers on
    ``executor``: a ``concurrent.futures`` executor (a thread pool of N by default), a Dask
    ``distributed.Client``, or the ``ray`` module once ``ray.init()`` has run (each worker a
    ``ray.remote`` task). Every machine that runs a worker must see the inputs and the output's
    folder at the same paths (absolute paths, on a shared file system). A worker that fails
    raises ``TjoinError`` naming it, once the job is abandoned: nothing is published. The
    result is the plan, with each worker's share under ``workers``.

    >>> written = tjoin.join(["x.npy", "y.npy"], "xy.npy", axis=0)
    >>> written["output"], written["tensors"][0]["shape"]
    ({'bytes': 36, 'format': 'npy', 'path': 'xy.npy'}, [3, 3])
    """
    words = _words("join", _flags.JOIN, _SET_BY_JOIN, options)
    words += _words("join", _flags.JOIN, (), {"output": output, "axis": axis})
    paths = ["--", *_paths(inputs)]
    if workers is not None or executor is not None:
        return _job(words, paths, _count(workers), _submitter(executor), progress)
    words += ["--print-plan=json", "--progress=" + ("always" if progress else "never")]
    return _run(words + paths, progress)


def _count(workers: Any) -> int:
    """``workers=``: a count from 1."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise TypeError(f"workers= takes a count of workers from 1, not {workers!r}")
    return workers


#: Runs each worker's words somewhere and says, for each, what it raised (``None``: done).
Submitter = Callable[[List[List[str]]], List[Optional[BaseException]]]


def _submitter(executor: Any) -> Submitter:
    """How the workers run on ``executor``; ``TypeError`` for one tjoin cannot use, before
    anything runs."""
    if executor is None:

        def threads(tasks: List[List[str]]) -> List[Optional[BaseException]]:
            with concurrent.futures.ThreadPoolExecutor(max_workers=len(tasks)) as pool:
                return _outcomes([pool.submit(_work, t) for t in tasks], lambda f: f.result())

        return threads
    module = type(executor).__module__.split(".")[0]
    if getattr(executor, "__name__", None) == "ray" and hasattr(executor, "remote"):

        def ray_tasks(tasks: List[List[str]]) -> List[Optional[BaseException]]:
            remote = executor.remote(_work)
            return _outcomes([remote.remote(t) for t in tasks], executor.get)

        return ray_tasks
    if module == "distributed" and hasattr(executor, "submit"):

        def dask_tasks(tasks: List[List[str]]) -> List[Optional[BaseException]]:
            # pure=False: two workers' calls are never taken for one.
            futures = [executor.submit(_work, t, pure=False) for t in tasks]
            return _outcomes(futures, lambda f: f.result())

        return dask_tasks
    if isinstance(executor, concurrent.futures.Executor):

        def pool(tasks: List[List[str]]) -> List[Optional[BaseException]]:
            return _outcomes([executor.submit(_work, t) for t in tasks], lambda f: f.result())

        return pool
    raise TypeError(
        "executor= takes a concurrent.futures executor, a dask.distributed Client or the ray "
        f"module, not {executor!r}"
    )


def _outcomes(
    handles: Sequence[Any], result: Callable[[Any], Any]
) -> List[Optional[BaseException]]:
    """Waits for every handle; what each raised, or ``None``."""
    outcomes: List[Optional[BaseException]] = []
    for handle in handles:
        try:
            result(handle)
            outcomes.append(None)
        except Exception as error:  # noqa: BLE001 - reported as the worker's failure
            outcomes.append(error)
    return outcomes


def _work(words: List[str]) -> Dict[str, Any]:
    """One worker: runs tjoin with ``words`` where the executor runs it (by the tjoin
    installed there)."""
    return _run(words, False)


def _job(
    words: List[str], paths: List[str], workers: int, submit: Submitter, progress: bool
) -> Dict[str, Any]:
    """The join or split (``words``) as a job of ``workers``: begin, every worker through
    ``submit``, commit; on any failure, the job abandoned and ``TjoinError`` raised, nothing
    published."""
    quiet = ["--print-plan=json", "--progress=never"]
    _run(words + [f"--workers={workers}", "--begin"] + quiet + paths, False)
    try:
        tasks = [words + [f"--worker={i}/{workers}"] + quiet + paths for i in range(workers)]
        failed = [(i, e) for i, e in enumerate(submit(tasks)) if e is not None]
        if failed:
            worker, error = failed[0]
            # A task's error as its executor hands it back (Ray wraps it, keeping its cause).
            cause = getattr(error, "cause", None) or error
            said = cause.args[0] if isinstance(cause, TjoinError) and cause.args else str(cause)
            more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
            raise TjoinError(
                f"worker {worker}/{workers} failed{more}: {said}; nothing was published",
                getattr(cause, "refusal", None),
                getattr(cause, "exit_code", 1),
                getattr(cause, "stderr", None),
            )
        commit = [f"--workers={workers}", "--commit", "--print-plan=json"]
        commit.append("--progress=" + ("always" if progress else "never"))
        return _run(words + commit + paths, progress)
    except BaseException:
        abandon = [find_tjoin_bin(), *words, f"--workers={workers}", "--abandon", "-q", *paths]
        subprocess.run(abandon, stdin=subprocess.DEVNULL, capture_output=True, check=False)
        raise


def split(
    input: StrPath,
    output: Union[StrPath, Sequence[StrPath]],
    axis: Optional[int] = None,
    parts: Optional[int] = None,
    sizes: Optional[Sequence[int]] = None,
    ranks: Optional[int] = None,
    *,
    progress: bool = False,
    workers: Optional[int] = None,
    executor: Any = None,
    **options: Any,
) -> Dict[str, Any]:
    """Split ``input`` along ``axis`` into outputs; return the plan that was carried out.

    Into ``parts`` parts as ``numpy.array_split`` cuts, parts of ``sizes``, or ``ranks``
    tensor-parallel ranks by tensor rules (``rules="rules/llama.rules"``). ``output`` is one
    template for all (``"part-{part}.npy"``, ``"tp{rank}/model.safetensors"``) or a list of
    paths, one per output. ``options`` are the long flags of ``tjoin split``, as ``join``
    takes its own; ``progress=True`` shows the progress bar.

    Returns the plan ``tjoin split --dry-run=json`` prints, for what was written: ``input``,
    ``bytes`` and ``outputs``, each with its ``path``, ``format``, ``bytes`` and ``tensors``.
    Raises ``TjoinError`` when tjoin refuses or fails (no output is then written), and
    ``TypeError`` for an option ``tjoin split`` does not have.

    ``workers=N`` and ``executor=`` run the split as a job of N workers, as ``join`` runs
    its own: the outputs (files in one folder, or sharded folders: ``"tp{rank}/"``) on a
    file system every worker sees, at the same paths. The result is the plan, with each
    worker's share of the outputs' bytes under ``workers``.

    >>> parts = tjoin.split("xy.npy", "part-{part}.npy", axis=0, sizes=[2, 1])
    >>> [(part["path"], part["tensors"][0]["shape"]) for part in parts["outputs"]]
    [('part-0.npy', [2, 3]), ('part-1.npy', [1, 3])]
    """
    words = ["split"] + _words("split", _flags.SPLIT, _SET_BY_SPLIT, options)
    given = {"output": output, "axis": axis, "parts": parts, "sizes": sizes, "ranks": ranks}
    words += _words("split", _flags.SPLIT, (), given)
    paths = ["--", *_paths(input)]
    if workers is not None or executor is not None:
        return _job(words, paths, _count(workers), _submitter(executor), progress)
    words += ["--print-plan=json", "--progress=" + ("always" if progress else "never")]
    return _run(words + paths, progress)


def plan(
    inputs: Union[StrPath, Sequence[StrPath]],
    output: Optional[StrPath] = None,
    axis: Optional[int] = None,
    **options: Any,
) -> Dict[str, Any]:
    """Check a join and return its plan (``tjoin --dry-run=json``), writing nothing.

    Takes what ``join`` takes; without ``output``, the output is planned like the first
    input. The plan holds ``inputs`` (each with its ``tensors``), ``tensors`` (each output
    tensor: ``name``, ``dtype``, ``shape``, ``axis``, the ``inputs`` it comes from, ``kept``,
    the ``rule`` that decided it), ``output`` (``path``, ``format``, ``bytes``), ``shards``
    for a sharded output, and the ``rules`` the join passed; tjoin's man page, DRY RUN,
    describes every field. Raises ``TjoinError`` for a refusal, ``TypeError`` for an option
    tjoin does not have.

    >>> tjoin.plan(["x.npy", "y.npy"], axis=0)["tensors"][0]["shape"]
    [3, 3]
    """
    words = _words("plan", _flags.JOIN, _SET_BY_JOIN, options)
    words += _words("plan", _flags.JOIN, (), {"output": output, "axis": axis})
    return _run(words + ["--dry-run=json", "--", *_paths(inputs)], False)


def _paths(paths: Union[StrPath, Sequence[StrPath]]) -> List[str]:
    """One path or a sequence of them, as words."""
    if isinstance(paths, (str, os.PathLike)):
        return [os.fspath(paths)]
    if isinstance(paths, bytes):
        raise TypeError("tjoin takes paths as str or path-like objects, not bytes")
    return [os.fspath(path) for path in paths]


def _words(
    function: str,
    table: Mapping[str, Tuple[str, str]],
    set_here: Sequence[str],
    options: Mapping[str, Any],
) -> List[str]:
    """The words of ``options`` by ``table`` (keyword -> (flag, kind)); ``TypeError`` for a
    keyword it lacks or sets itself (``set_here``), and for a value of the wrong type."""
    words: List[str] = []
    for keyword, value in options.items():
        entry = table.get(keyword)
        if entry is None or keyword in set_here:
            offered = [name for name in table if name not in set_here]
            close = difflib.get_close_matches(keyword, offered, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            if entry is not None:
                done_by = "tjoin.plan()" if keyword == "dry_run" else f"tjoin.{function}() itself"
                hint = f" ({entry[0]} is set by {done_by})"
            raise TypeError(
                f"tjoin.{function}() got an unexpected keyword argument {keyword!r}{hint}"
            )
        flag, kind = entry
        if value is None or (value is False and kind in ("bare", "optional")):
            continue
        if kind == "bare" or (kind == "optional" and value is True):
            if value is not True:
                raise TypeError(f"{keyword}= takes True or False ({flag} has no value)")
            words.append(flag)
        elif kind == "repeat":
            words += [f"{flag}={item}" for item in _items(keyword, value)]
        else:
            words.append(f"{flag}={_value(keyword, value)}")
    return words


def _value(keyword: str, value: Any) -> str:
    """One value: a path, a string or a number; a list or tuple of numbers is given
    separated by commas (``sizes=[900, 100]``, ``expect_shape=(3, 3)``)."""
    if isinstance(value, (list, tuple)):
        return ",".join(_value(keyword, item) for item in value)
    if isinstance(value, bool) or not isinstance(value, (str, int, float, os.PathLike)):
        raise TypeError(f"{keyword}= takes a string, a number or a path, not {value!r}")
    return os.fspath(value) if isinstance(value, os.PathLike) else str(value)


def _items(keyword: str, value: Any) -> List[str]:
    """A repeatable flag's values: a list or tuple of them, one value, or a dict of
    ``KEY=VALUE`` items (``metadata={"format": "pt"}``, ``axis_for={"*.o_proj.weight": 1}``)."""
    if isinstance(value, Mapping):
        return [f"{_value(keyword, key)}={_value(keyword, item)}" for key, item in value.items()]
    if isinstance(value, (list, tuple)):
        return [_value(keyword, item) for item in value]
    return [_value(keyword, value)]


def _run(words: List[str], progress: bool) -> Dict[str, Any]:
    """Runs tjoin with ``words``: its JSON plan on success, else ``TjoinError``. Its stderr
    (warnings) is captured and shown on ``sys.stderr`` after a success, unless ``progress``
    passes it through as it comes."""
    command = [find_tjoin_bin(), *words]
    stderr = None if progress else subprocess.PIPE
    with subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=stderr,
    ) as process:
        try:
            out, err = process.communicate()
        except BaseException:
            # Interrupted (Ctrl-C in a notebook): tjoin, interrupted in turn, removes what it
            # was writing before it ends.
            if process.poll() is None:
                process.send_signal(signal.SIGINT if os.name != "nt" else signal.SIGTERM)
            process.wait()
            raise
    text = err.decode("utf-8", "replace") if err is not None else None
    status = process.returncode
    said = _json(out)
    if status == 0 and said is not None and "error" not in said:
        if text:
            sys.stderr.write(text)
        return said
    if status == 0:
        raise TjoinError("tjoin ended with status 0 but printed no plan", None, status, text)
    error = said.get("error") if said is not None else None
    if isinstance(error, dict):
        refusals = error.get("refusals") or [{}]
        message = str(refusals[0].get("headline", ""))
        if len(refusals) > 1:
            message += f" (and {len(refusals) - 1} more refusals)"
        raise TjoinError(message, error, status, text)
    last = (text or "").strip().splitlines()[-1:] or [f"tjoin ended with status {status}"]
    raise TjoinError(last[0], None, status, text)


def _json(out: bytes) -> Optional[Dict[str, Any]]:
    """The one JSON object tjoin printed on stdout, if it printed one."""
    try:
        value = json.loads(out.decode("utf-8"))
    except ValueError:
        return None
    return value if isinstance(value, dict) else None

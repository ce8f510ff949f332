"""``tjoin.join(..., workers=N, executor=E)``: a join run as a job of N workers (tjoin's
``--workers N --begin``, ``--worker I/N``, ``--workers N --commit``), the workers on a
``concurrent.futures`` executor, a Dask ``distributed`` local cluster or a local Ray.

The Dask and Ray tests run where those are installed, and say why they are skipped
elsewhere; CI's wheel-installed stage installs Dask (``.ci/wheel-installed.sh``), and under
CI (``CI=true``) the Dask tests run whether or not it is there, so a missing Dask fails
rather than skips. Ray is too large a download for CI: its tests run by hand. The
``concurrent.futures`` ones always run. Each test joins real .npy files it
writes itself (with the standard library: no numpy), byte for byte against the one-process
join.
"""

from __future__ import annotations

import concurrent.futures
import importlib.util
import json
import os
import struct
import tempfile
import unittest
from pathlib import Path
from typing import Any, Dict, List, Tuple
from unittest import mock

import tjoin
import tjoin._api

HAVE_DASK = importlib.util.find_spec("distributed") is not None
HAVE_RAY = importlib.util.find_spec("ray") is not None


def write_npy(path: Path, rows: int, columns: int, start: float) -> None:
    """A C-order float32 .npy file of ``rows`` x ``columns`` values counting from ``start``."""
    header = f"{{'descr': '<f4', 'fortran_order': False, 'shape': ({rows}, {columns}), }}"
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    values = struct.pack(f"<{rows * columns}f", *(start + i for i in range(rows * columns)))
    magic = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header))
    path.write_bytes(magic + header.encode() + values)


class Job(unittest.TestCase):
    """Each test in a fresh folder of two inputs, ``a.npy`` and ``b.npy``, and the
    one-process join of them, ``one.npy``; paths are absolute, as every worker must see them."""

    def setUp(self) -> None:
        folder = tempfile.TemporaryDirectory(prefix="tjoin-workers-")
        self.addCleanup(folder.cleanup)
        self.folder = Path(folder.name)
        write_npy(self.folder / "a.npy", 2000, 96, 0.0)
        write_npy(self.folder / "b.npy", 3000, 96, 1e6)
        self.inputs = [self.folder / "a.npy", self.folder / "b.npy"]
        tjoin.join(self.inputs, self.folder / "one.npy", axis=0)

    def joined(self, workers: int, executor: Any) -> dict:
        """The job's join into ``out.npy``: the same bytes as the one process's, and no file
        of the job left."""
        written = tjoin.join(
            self.inputs, self.folder / "out.npy", axis=0, workers=workers, executor=executor
        )
        self.assertEqual(
            (self.folder / "out.npy").read_bytes(), (self.folder / "one.npy").read_bytes()
        )
        self.assertEqual(self.entries(), ["a.npy", "b.npy", "one.npy", "out.npy"])
        self.assertEqual(len(written["workers"]), workers)
        self.assertEqual(written["workers"][-1]["end"], (self.folder / "out.npy").stat().st_size)
        return written

    def entries(self) -> List[str]:
        return sorted(os.listdir(self.folder))

    def fails_and_publishes_nothing(self, executor: Any) -> None:
        """Worker 1 of 3 fails (it runs with a count the job was not begun with, which tjoin
        refuses): ``TjoinError`` names it, and the job is abandoned, nothing published."""

        def failing(words: List[str]) -> Any:
            from tjoin import _api

            words = ["--worker=1/4" if word == "--worker=1/3" else word for word in words]
            return _api._run(words, False)

        with mock.patch.object(tjoin._api, "_work", failing):
            with self.assertRaises(tjoin.TjoinError) as raised:
                out = self.folder / "out.npy"
                tjoin.join(self.inputs, out, axis=0, workers=3, executor=executor)
        message = str(raised.exception)
        self.assertTrue(message.startswith("worker 1/3 failed: "), message)
        self.assertIn("has 3 workers, and this step says 4", message)
        self.assertIn("nothing was published", message)
        self.assertEqual(raised.exception.exit_code, 2)
        self.assertEqual(self.entries(), ["a.npy", "b.npy", "one.npy"])


class Threads(Job):
    def test_the_default_executor_runs_the_workers_on_threads(self) -> None:
        written = self.joined(3, None)
        self.assertEqual(written["output"]["path"], str(self.folder / "out.npy"))

    def test_a_process_pool_runs_them_in_processes(self) -> None:
        with concurrent.futures.ProcessPoolExecutor(max_workers=2) as pool:
            self.joined(4, pool)

    def test_a_failed_worker_raises_tjoin_error_and_nothing_is_published(self) -> None:
        with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
            self.fails_and_publishes_nothing(pool)

    def test_a_usage_mistake_raises_type_error_before_anything_runs(self) -> None:
        for bad in ({"workers": 0}, {"workers": True}, {"executor": object(), "workers": 2}):
            with self.assertRaises(TypeError):
                tjoin.join(self.inputs, self.folder / "out.npy", axis=0, **bad)
        with self.assertRaises(TypeError):
            tjoin.join(self.inputs, self.folder / "out.npy", axis=0, begin=True)
        self.assertEqual(self.entries(), ["a.npy", "b.npy", "one.npy"])


def write_safetensors(path: Path, tensors: List[Tuple[str, int, int]]) -> None:
    """A safetensors file of float32 ``(name, rows, columns)`` tensors counting from 0."""
    header: Dict[str, Any] = {}
    data = b""
    for name, rows, columns in tensors:
        values = struct.pack(f"<{rows * columns}f", *range(rows * columns))
        header[name] = {
            "dtype": "F32",
            "shape": [rows, columns],
            "data_offsets": [len(data), len(data) + len(values)],
        }
        data += values
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


class Split(unittest.TestCase):
    """``tjoin.split(..., workers=N, executor=E)``: a split into .npy files and one into
    sharded safetensors folders, each the same bytes as the one process's split."""

    def setUp(self) -> None:
        folder = tempfile.TemporaryDirectory(prefix="tjoin-workers-split-")
        self.addCleanup(folder.cleanup)
        self.folder = Path(folder.name)
        write_npy(self.folder / "a.npy", 3001, 64, 0.0)
        write_safetensors(self.folder / "m.safetensors", [("x.weight", 300, 64), ("y", 7, 9)])

    def same(self, one: Path, out: Path) -> None:
        """``out`` holds the bytes of ``one``: a file, or every file of a folder."""
        if one.is_dir():
            self.assertEqual(sorted(os.listdir(out)), sorted(os.listdir(one)))
            for name in os.listdir(one):
                self.same(one / name, out / name)
        else:
            self.assertEqual(out.read_bytes(), one.read_bytes(), out)

    def split_both(self, workers: int, executor: Any) -> None:
        f = self.folder
        for source, template, options in (
            ("a.npy", "{}-{{part}}.npy", {"axis": 0}),
            ("m.safetensors", "{}{{part}}/", {"axis": -1, "max_shard_size": "20KB"}),
        ):
            # As str: a Path drops the trailing / that asks for a sharded folder.
            tjoin.split(f / source, f"{f}/{template.format('one')}", parts=3, **options)
            written = tjoin.split(
                f / source,
                f"{f}/{template.format('job')}",
                parts=3,
                workers=workers,
                executor=executor,
                **options,
            )
            self.assertEqual(len(written["workers"]), workers)
            self.assertEqual([o["path"] for o in written["outputs"]][0][: len(str(f))], str(f))
            for part in range(3):
                one = Path(template.format("one").format(part=part).rstrip("/"))
                out = Path(template.format("job").format(part=part).rstrip("/"))
                self.same(f / one, f / out)
        left = [p for p in f.rglob("*") if "tjoin-job" in p.name]
        self.assertEqual(left, [])

    def test_the_default_executor_runs_the_split_workers_on_threads(self) -> None:
        self.split_both(3, None)

    def test_a_process_pool_runs_the_split_workers_in_processes(self) -> None:
        with concurrent.futures.ProcessPoolExecutor(max_workers=2) as pool:
            self.split_both(4, pool)

    def test_a_failed_split_worker_raises_and_nothing_is_published(self) -> None:
        def failing(words: List[str]) -> Any:
            from tjoin import _api

            words = ["--worker=1/4" if word == "--worker=1/2" else word for word in words]
            return _api._run(words, False)

        with mock.patch.object(tjoin._api, "_work", failing):
            with self.assertRaises(tjoin.TjoinError) as raised:
                out = f"{self.folder}/job{{part}}/"
                tjoin.split(self.folder / "m.safetensors", out, axis=-1, parts=2, workers=2)
        self.assertIn("worker 1/2 failed: ", str(raised.exception))
        names = [p.name for p in self.folder.rglob("*")]
        self.assertFalse([n for n in names if n.endswith(".json") or "tjoin-job" in n], names)


@unittest.skipUnless(
    HAVE_DASK or os.environ.get("CI") == "true",
    "Dask is not installed (pip install dask distributed)",
)
class Dask(Job):
    @classmethod
    def setUpClass(cls) -> None:
        from distributed import Client, LocalCluster

        cls.cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True)
        cls.client = Client(cls.cluster)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.client.close()
        cls.cluster.close()

    def test_a_local_cluster_runs_the_workers(self) -> None:
        self.joined(3, self.client)

    def test_a_failed_worker_raises_tjoin_error_and_nothing_is_published(self) -> None:
        self.fails_and_publishes_nothing(self.client)


@unittest.skipUnless(HAVE_RAY, "Ray is not installed (pip install ray)")
class Ray(Job):
    @classmethod
    def setUpClass(cls) -> None:
        import ray

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        cls.ray = ray

    @classmethod
    def tearDownClass(cls) -> None:
        cls.ray.shutdown()

    def test_a_local_ray_runs_each_worker_as_a_remote_task(self) -> None:
        self.joined(3, self.ray)

    def test_a_failed_worker_raises_tjoin_error_and_nothing_is_published(self) -> None:
        self.fails_and_publishes_nothing(self.ray)


if __name__ == "__main__":
    unittest.main()

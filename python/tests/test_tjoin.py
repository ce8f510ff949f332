"""The Python module as pip installs it: tjoin.join, tjoin.split, tjoin.plan, TjoinError, the
options mapping, __version__, and the examples of README.md's "From Python" section and of
the docstrings, each run in a folder of its own holding the files they name.

CI's wheel-installed stage (.ci/wheel-installed.sh) runs these with the Python of a fresh virtual
environment the wheel was installed into, with an empty PATH (no Rust, no other tjoin):
``python -m unittest discover -s python/tests -v``. They use the standard library only, and
the repository's fixtures and README.md.
"""

from __future__ import annotations

import doctest
import os
import pickle
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from typing import Any, Dict, List
from unittest import mock

import tjoin
import tjoin._api

ROOT = Path(__file__).resolve().parents[2]

# The files the examples name: (name in the folder, file or folder in the repository).
FILES = [
    ("x.npy", "fixtures/examples/x.npy"),
    ("y.npy", "fixtures/examples/y.npy"),
    ("a.npy", "fixtures/examples/a.npy"),
    ("tp0.safetensors", "fixtures/merge/llama/tp0.safetensors"),
    ("tp1.safetensors", "fixtures/merge/llama/tp1.safetensors"),
    ("original.safetensors", "fixtures/merge/llama/expected.safetensors"),
    ("rules", "rules"),
]


def npy_data(path: str) -> bytes:
    """The data of a version 1 .npy file: what follows its header."""
    raw = Path(path).read_bytes()
    assert raw[:8] == b"\x93NUMPY\x01\x00", raw[:8]
    return raw[10 + int.from_bytes(raw[8:10], "little") :]


class InAFolder(unittest.TestCase):
    """Each test runs in a fresh folder holding ``FILES``."""

    def setUp(self) -> None:
        folder = tempfile.TemporaryDirectory(prefix="tjoin-python-")
        self.addCleanup(folder.cleanup)
        for name, source in FILES:
            if (ROOT / source).is_dir():
                shutil.copytree(ROOT / source, os.path.join(folder.name, name))
            else:
                shutil.copyfile(ROOT / source, os.path.join(folder.name, name))
        self.addCleanup(os.chdir, os.getcwd())
        os.chdir(folder.name)
        self.folder = folder.name

    def entries(self) -> List[str]:
        return sorted(os.listdir(self.folder))


class Installed(unittest.TestCase):
    def test_the_module_and_its_binary_are_the_installed_ones(self) -> None:
        prefix = os.path.realpath(sys.prefix)
        for path in (tjoin.__file__, tjoin.find_tjoin_bin()):
            self.assertTrue(os.path.realpath(path).startswith(prefix + os.sep), path)
        self.assertFalse(os.path.realpath(tjoin.__file__).startswith(str(ROOT / "python")))
        package = os.path.dirname(os.path.realpath(tjoin.__file__))
        self.assertTrue(os.path.isfile(os.path.join(package, "py.typed")))

    def test_version_is_the_binarys(self) -> None:
        said = subprocess.run(
            [tjoin.find_tjoin_bin(), "--version"], capture_output=True, text=True, check=True
        ).stdout
        self.assertEqual(said.split(), ["tjoin", tjoin.__version__])


class Functions(InAFolder):
    def test_plan_returns_the_dry_run_plan_and_writes_nothing(self) -> None:
        before = self.entries()
        plan = tjoin.plan(["x.npy", "y.npy"], "xy.npy", axis=0)
        self.assertEqual(plan["output"], {"bytes": 36, "format": "npy", "path": "xy.npy"})
        self.assertEqual(plan["tensors"][0]["shape"], [3, 3])
        self.assertEqual([i["path"] for i in plan["inputs"]], ["x.npy", "y.npy"])
        self.assertEqual(self.entries(), before)
        # Without an output, and with one input as a single path.
        self.assertEqual(tjoin.plan(Path("x.npy"))["tensors"][0]["shape"], [2, 3])

    def test_join_writes_the_join_and_returns_its_plan(self) -> None:
        plan = tjoin.plan(["x.npy", Path("y.npy")], "xy.npy", axis=0)
        written = tjoin.join(["x.npy", Path("y.npy")], Path("xy.npy"), axis=0)
        self.assertEqual(written, plan)
        self.assertEqual(npy_data("xy.npy"), npy_data("x.npy") + npy_data("y.npy"))

    def test_an_append_grows_its_first_input_and_returns_its_plan(self) -> None:
        tjoin.join(["x.npy"], "xy.npy")
        grown = tjoin.join(["xy.npy", "y.npy"], None, axis=0, append=True)
        self.assertEqual(grown["output"]["append"], {"bytes": 12, "offset": 152})
        self.assertEqual(npy_data("xy.npy"), npy_data("x.npy") + npy_data("y.npy"))

    def test_split_then_join_gives_back_the_input(self) -> None:
        tjoin.join(["x.npy", "y.npy"], "xy.npy", axis=0)
        parts = tjoin.split("xy.npy", "part-{part}.npy", axis=0, parts=3)
        paths = [part["path"] for part in parts["outputs"]]
        self.assertEqual(paths, ["part-0.npy", "part-1.npy", "part-2.npy"])
        self.assertEqual(parts["bytes"], 36)
        tjoin.join(paths, "back.npy", axis=0)
        self.assertEqual(Path("back.npy").read_bytes(), Path("xy.npy").read_bytes())
        # Sizes, and outputs named one by one.
        sizes = tjoin.split("xy.npy", ["top.npy", "bottom.npy"], axis=0, sizes=[2, 1])
        shapes = [o["tensors"][0]["shape"] for o in sizes["outputs"]]
        self.assertEqual(shapes, [[2, 3], [1, 3]])
        self.assertEqual(Path("top.npy").read_bytes(), Path("x.npy").read_bytes())

    def test_split_by_ranks_and_rules_is_joined_back_by_the_same_rules(self) -> None:
        split = tjoin.split(
            "original.safetensors",
            "tp{rank}.safetensors",
            ranks=2,
            rules="rules/llama.rules",
            heads="2:2",
        )
        ranks = [o["path"] for o in split["outputs"]]
        self.assertEqual(ranks, ["tp0.safetensors", "tp1.safetensors"])
        tjoin.join(ranks, "back.safetensors", rules=["rules/llama.rules"])
        self.assertEqual(
            Path("back.safetensors").read_bytes(), Path("original.safetensors").read_bytes()
        )


class Options(InAFolder):
    def test_repeatable_and_bare_flags_reach_tjoin(self) -> None:
        merge: Dict[str, Any] = dict(
            axis_for=["*.o_proj.weight=1", "*.down_proj.weight=1"],
            keep=["*norm*"],
            like="original.safetensors",
            no_clobber=True,
        )
        inputs = ["tp0.safetensors", "tp1.safetensors"]
        merged = tjoin.join(inputs, "model.safetensors", axis=0, **merge)
        self.assertEqual(
            Path("model.safetensors").read_bytes(), Path("original.safetensors").read_bytes()
        )
        rules = {t["name"]: t["rule"] for t in merged["tensors"]}
        self.assertEqual(rules["model.norm.weight"], "--keep '*norm*'")
        self.assertEqual(
            rules["model.layers.1.mlp.down_proj.weight"], "--axis-for '*.down_proj.weight=1'"
        )
        # The bare flag: the output exists now, and --no-clobber refuses to replace it.
        with self.assertRaises(tjoin.TjoinError) as caught:
            tjoin.join(inputs, "model.safetensors", axis=0, **merge)
        self.assertIn("--no-clobber", str(caught.exception))
        # False leaves a bare flag out: the output is replaced.
        tjoin.join(inputs, "model.safetensors", axis=0, **dict(merge, no_clobber=False))

    def test_options_become_the_long_flags(self) -> None:
        words = tjoin._api._words(
            "join",
            tjoin._flags.JOIN,
            (),
            {
                "keep": ["*norm*", "*bias"],
                "no_clobber": True,
                "strict": False,
                "cast": "bfloat16",
                "like": Path("orig"),
                "metadata": {"format": "pt"},
                "axis_for": "*.o_proj.weight=1",
                "expect_shape": (3, 3),
                "name": None,
                "axis": -1,
            },
        )
        self.assertEqual(
            words,
            [
                "--keep=*norm*",
                "--keep=*bias",
                "--no-clobber",
                "--cast=bfloat16",
                "--like=orig",
                "--metadata=format=pt",
                "--axis-for=*.o_proj.weight=1",
                "--expect-shape=3,3",
                "--axis=-1",
            ],
        )

    def test_a_usage_mistake_raises_type_error_before_anything_runs(self) -> None:
        never = mock.Mock(side_effect=AssertionError("tjoin ran"))
        with mock.patch("subprocess.Popen", never):
            for call, said in [
                (lambda: tjoin.join(["x.npy"], "o.npy", kep=["*"]), "did you mean 'keep'?"),
                (lambda: tjoin.join(["x.npy"], "o.npy", dry_run=True), "set by tjoin.plan()"),
                (lambda: tjoin.plan(["x.npy"], print_plan="json"), "'print_plan' (--print-plan"),
                (lambda: tjoin.plan(["x.npy"], progress=True), "'progress'"),
                (lambda: tjoin.split("x.npy", "p{part}.npy", stack=True), "'stack'"),
                (lambda: tjoin.join(["x.npy"], "o.npy", no_clobber="yes"), "no_clobber="),
                (lambda: tjoin.join(["x.npy"], "o.npy", cast=True), "cast="),
                (lambda: tjoin.join(["x.npy"], "o.npy", keep=[{"a": 1}]), "keep="),
                (lambda: tjoin.join(b"x.npy", "o.npy"), "bytes"),  # type: ignore[arg-type]
            ]:
                with self.assertRaises(TypeError) as caught:
                    call()
                self.assertIn(said, str(caught.exception))
        self.assertFalse(os.path.exists("o.npy"))


class Refusals(InAFolder):
    def test_a_refusal_raises_tjoin_error_and_writes_nothing(self) -> None:
        before = self.entries()
        with self.assertRaises(tjoin.TjoinError) as caught:
            tjoin.join(["a.npy", "x.npy"], "out.npy", axis=0)
        error = caught.exception
        self.assertEqual(error.exit_code, 2)
        assert error.refusal is not None
        self.assertEqual(error.refusal["exit_code"], 2)
        first = error.refusal["refusals"][0]
        self.assertEqual(str(error), first["headline"])
        self.assertIn("different rank", str(error))
        self.assertIn("a.npy", first["details"][0])
        self.assertIn("reshape", first["hint"])
        assert error.stderr is not None
        self.assertTrue(error.stderr.startswith("tjoin: error: " + first["headline"]))
        self.assertEqual(self.entries(), before)
        again = pickle.loads(pickle.dumps(error))
        self.assertEqual(
            (type(again), str(again), again.refusal, again.exit_code, again.stderr),
            (tjoin.TjoinError, str(error), error.refusal, 2, error.stderr),
        )

    def test_failures_and_usage_mistakes_of_values_are_tjoin_errors_too(self) -> None:
        with self.assertRaises(tjoin.TjoinError) as caught:
            tjoin.join(["x.npy", "gone.npy"], "out.npy", axis=0)
        self.assertEqual(caught.exception.exit_code, 1)
        self.assertIn("gone.npy", str(caught.exception))
        with self.assertRaises(tjoin.TjoinError) as caught:
            tjoin.join(["x.npy", "y.npy"], "out.npy", axis=0, json_form="bogus")
        self.assertEqual(caught.exception.exit_code, 2)
        refusal = caught.exception.refusal
        assert refusal is not None
        self.assertIn("[possible values: nested, object]", refusal["refusals"][0]["details"])
        with self.assertRaises(tjoin.TjoinError) as caught:
            tjoin.split("x.npy", "p{part}.npy", axis=7, parts=2)
        self.assertIn("axis 7", str(caught.exception))
        with self.assertRaises(tjoin.TjoinError) as caught:
            tjoin.plan(["x.npy", "y.npy"], axis=1)
        self.assertIn("axis 1", str(caught.exception))
        self.assertFalse([f for f in self.entries() if f.startswith(("out", "p"))])


class Binary(InAFolder):
    def test_another_tjoin_first_on_path_is_not_run(self) -> None:
        fake = os.path.join(self.folder, "bin", "tjoin")
        os.makedirs(os.path.dirname(fake))
        with open(fake, "w") as script:
            script.write("#!/bin/sh\necho ran > ran-the-fake\nexit 3\n")
        os.chmod(fake, os.stat(fake).st_mode | stat.S_IEXEC)
        path = os.path.dirname(fake) + os.pathsep + os.environ.get("PATH", "")
        with mock.patch.dict(os.environ, {"PATH": path}):
            self.assertEqual(shutil.which("tjoin"), fake)
            tjoin.join(["x.npy", "y.npy"], "xy.npy", axis=0)
        self.assertFalse(os.path.exists("ran-the-fake"))
        self.assertTrue(os.path.exists("xy.npy"))

    def test_progress_is_off_unless_asked_for(self) -> None:
        def stderr_of(progress: str) -> str:
            code = (
                "import tjoin\n"
                f"tjoin.join(['x.npy', 'y.npy'], 'xy.npy', axis=0{progress})\n"
                f"tjoin.split('xy.npy', 'p{{part}}.npy', axis=0, parts=3{progress})\n"
            )
            done = subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True
            )
            return done.stderr

        self.assertEqual(stderr_of(""), "")
        shown = stderr_of(", progress=True")
        self.assertIn("wrote xy.npy: 36 B", shown)
        self.assertIn("wrote p0.npy and 2 more: 36 B", shown)

    def test_warnings_are_shown_once_the_run_ends(self) -> None:
        # A rule that matches no tensor is a warning (not a refusal) without --strict.
        code = (
            "import tjoin\n"
            "tjoin.join(['tp0.safetensors', 'tp1.safetensors'], 'm.safetensors', axis=0,"
            " axis_for=['*.o_proj.weight=1', '*.down_proj.weight=1'],"
            " keep=['*norm*', 'no-such-tensor'], like='original.safetensors')\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        self.assertIn("no-such-tensor", done.stderr)
        self.assertTrue(done.stderr.startswith("tjoin: warning: "), done.stderr)


def run_examples(test: unittest.TestCase, examples: List[doctest.DocTest]) -> int:
    """Runs doctests in the current folder; fails `test` on any failure. Returns how many
    examples ran."""
    runner = doctest.DocTestRunner(verbose=False, optionflags=doctest.ELLIPSIS)
    for example in examples:
        runner.run(example)
    results = runner.summarize(verbose=False)
    test.assertEqual(results.failed, 0, "examples failed (their output is above)")
    return results.attempted


class Documents(InAFolder):
    def test_readme_from_python_examples_run_as_shown(self) -> None:
        readme = (ROOT / "README.md").read_text(encoding="utf-8")
        section = readme.split("\n## From Python\n", 1)[1].split("\n## ", 1)[0]
        blocks = section.split("```pycon\n")[1:]
        self.assertGreaterEqual(len(blocks), 2)
        text = "\n".join(block.split("```", 1)[0] for block in blocks)
        parser = doctest.DocTestParser()
        example = parser.get_doctest(text, {}, "README.md, From Python", "README.md", 0)
        self.assertGreaterEqual(run_examples(self, [example]), 10)

    def test_docstring_examples_run_as_shown(self) -> None:
        finder = doctest.DocTestFinder()
        found = finder.find(tjoin, "tjoin", globs={"tjoin": tjoin})
        named = {test.name for test in found if test.examples}
        expected = {"tjoin", "tjoin.join", "tjoin.split", "tjoin.plan", "tjoin.TjoinError"}
        expected.add("tjoin.find_tjoin_bin")
        self.assertEqual(named, expected)
        for test in found:
            # Each in a folder that holds xy.npy already (split's example cuts it).
            tjoin.join(["x.npy", "y.npy"], "xy.npy", axis=0)
            run_examples(self, [test])


if __name__ == "__main__":
    unittest.main()

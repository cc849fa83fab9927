"""mypy where third parties live: all of package segtk (the plugin API segtk.core, py.typed,
among it), every plugin package in the repository and a freshly scaffolded plugin of each kind
type-check with 0 errors, so `Attack[MyParams]`, `Trainable` and the rest of the contracts hold
for code written against them. Their tests are checked too, with the same config: plugin
authors copy them as examples of the API (segtk.testing's suites subclassed, its fixtures)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner

from segtk.cli import cli
from segtk.commands.scaffold import KINDS

ROOT = Path(__file__).resolve().parent.parent
# Plugin packages mypy still reports errors in (issue 22, item 3): each is fixed, then taken
# off this list. Shrink it, never grow it.
NOT_YET_CLEAN: set[str] = set()
# Test files (relative to the repository root) mypy still reports errors in: each is fixed,
# then taken off this list. Shrink it, never grow it.
TESTS_NOT_YET_CLEAN: set[str] = set()
# Each plugin's package, checked as the top-level package it installs as.
PLUGIN_PACKAGES = sorted(p for p in ROOT.glob("plugins/*/*/segtk_*")
                         if p.is_dir() and not p.name.endswith(".egg-info")
                         and p.name not in NOT_YET_CLEAN)
# Test folders are not packages: each file is a top-level module named after it.
TEST_FOLDERS = [ROOT / "tests", *sorted(ROOT.glob("plugins/*/*/tests"))]
ERROR = re.compile(r"^(?P<path>[^:\n]+\.py):\d+: error: ", re.MULTILINE)


def scaffold_every_kind(out: Path) -> list[Path]:
    """`segtk plugins new KIND typecheck-KIND` for every kind it offers; their packages."""
    packages = []
    for kind in KINDS:
        name = f"typecheck-{kind}"
        result = CliRunner().invoke(cli, ["plugins", "new", kind, name, "--out", str(out / kind)])
        assert result.exit_code == 0, result.output
        packages.append(out / kind / f"segtk_{name.replace('-', '_')}")
    return packages


def python_files(folders: Iterable[Path]) -> list[Path]:
    return sorted(f for folder in folders for f in folder.glob("*.py"))


def unique_names(files: list[Path]) -> list[list[Path]]:
    """`files` split into as few groups as needed for every module name (the file's stem) to
    be unique in its group: mypy refuses two modules of one name in a run."""
    groups: list[list[Path]] = []
    for f in files:
        group = next((g for g in groups if all(o.stem != f.stem for o in g)), None)
        if group is None:
            groups.append(group := [])
        group.append(f)
    return groups


def mypy(packages: list[Path], tmp_path: Path,
         files: Sequence[Path] = ()) -> subprocess.CompletedProcess[str]:
    """mypy with pyproject's config over package segtk and `packages` (folders), or, where
    `files` are given (mypy takes packages or files, not both), over `files`, reading the
    packages' types."""
    # The repository root *is* package `segtk` (pyproject's package-dir); mypy finds it by name
    # through a folder whose `segtk` entry points at the root.
    path = tmp_path / "path"
    if not path.exists():
        path.mkdir()
        (path / "segtk").symlink_to(ROOT)
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "segtk" / "mypy"
    search = [str(path), *sorted({str(p.parent) for p in packages})]
    names = [arg for p in packages for arg in ("-p", p.name)]
    targets = [str(f) for f in files] if files else ["-p", "segtk", *names]
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(cache), *targets],
        cwd=path, env={**os.environ, "MYPYPATH": os.pathsep.join(search)},
        capture_output=True, text=True,
    )


def failing_files(result: subprocess.CompletedProcess[str], cwd: Path) -> set[str]:
    """The files mypy (run in `cwd`) reported errors in, relative to the repository root where
    inside it."""
    assert result.returncode in (0, 1), result.stdout + result.stderr  # 2: mypy itself failed
    paths = {(cwd / m["path"]).resolve() for m in ERROR.finditer(result.stdout)}
    assert paths or result.returncode == 0, result.stdout + result.stderr
    return {str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p) for p in paths}


@pytest.mark.slow
def test_mypy_is_clean_on_segtk_plugins_scaffolds_and_their_tests(tmp_path: Path) -> None:
    pytest.importorskip("mypy", reason="mypy comes with the test extras: pip install -e .[test]")
    scaffolds = scaffold_every_kind(tmp_path / "scaffolds")
    packages = PLUGIN_PACKAGES + scaffolds
    files = python_files([*TEST_FOLDERS, *(p.parent / "tests" for p in scaffolds)])
    results = [mypy(packages, tmp_path)]
    results += [mypy(packages, tmp_path, group) for group in unique_names(files)]
    failing: set[str] = set()
    for result in results:
        failing |= failing_files(result, tmp_path / "path")
    output = "".join(r.stdout + r.stderr for r in results if r.returncode)
    assert failing <= TESTS_NOT_YET_CLEAN, output
    assert TESTS_NOT_YET_CLEAN <= failing, (
        f"now clean, take off TESTS_NOT_YET_CLEAN: {sorted(TESTS_NOT_YET_CLEAN - failing)}")


def test_files_of_one_name_go_to_separate_mypy_runs() -> None:
    """Two tests folders may hold a test_contract.py each: mypy refuses a second module of a
    name in one run, so they are checked in runs of their own (no file left out)."""
    files = [Path(p) for p in ("a/test_contract.py", "b/test_contract.py", "a/test_x.py",
                               "c/test_contract.py", "b/conftest.py")]
    groups = unique_names(files)
    assert len(groups) == 3 and sorted(f for g in groups for f in g) == sorted(files)
    for group in groups:
        assert len({f.stem for f in group}) == len(group), group

"""The mutation tool works as installed: the pinned mutmut runs with the pinned pytest, and
bench/mutation.py can make a group of any module. A mutmut that cannot run its tests (as 3.7.0
under pytest 9.2) fails here, not first when someone runs bench/mutation.sh."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _mutation_module():
    spec = importlib.util.spec_from_file_location("segtk_bench_mutation", REPO / "bench" / "mutation.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it executes
    spec.loader.exec_module(module)
    return module


def test_installed_mutmut_runs_the_installed_pytest(tmp_path: Path) -> None:
    pytest.importorskip("mutmut")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("def clip(x, hi):\n    return x if x < hi else hi\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_pkg.py").write_text(
        "from pkg import clip\n\n\ndef test_clip():\n    assert clip(1, 2) == 1\n"
        "    assert clip(2, 2) == 2\n    assert clip(3, 2) == 2\n")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.mutmut]\nsource_paths = ["pkg"]\nonly_mutate = ["pkg/__init__.py"]\n'
        'pytest_add_cli_args = ["-p", "no:cacheprovider"]\nuse_git_change_detection = false\n')
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    run = subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", "1"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    results = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    statuses = [line.rsplit(": ", 1)[1] for line in results.stdout.splitlines() if ": " in line]
    assert statuses, results.stdout + results.stderr
    # `<` -> `<=` is equivalent at the boundary (both give hi); every other mutant dies.
    assert statuses.count("killed") >= len(statuses) - 1, results.stdout


def test_a_module_group_finds_the_tests_that_name_it() -> None:
    if subprocess.run(["git", "-C", str(REPO), "rev-parse"], capture_output=True).returncode:
        pytest.skip("the mutation tool lists the checkout's files with git: not a git checkout")
    mutation = _mutation_module()
    group = mutation.module_group(["editkit/_selection.py"], [])
    assert group.paths == ("segtk/editkit/_selection.py",)
    assert "tests/test_samples.py" in group.tests
    assert all((REPO / t).read_text().count("segtk.editkit._selection") for t in group.tests)
    given = mutation.module_group(["benchmarks/edits.py"], ["tests/test_bench_edits.py"])
    assert given.tests == ("tests/test_bench_edits.py",)
    assert given.patterns() == ["segtk.benchmarks.edits.*"]


def test_a_plugins_tests_are_staged_with_the_readme_they_check(tmp_path: Path) -> None:
    """The editor suites check that a plugin's README documents its values: staged without
    it, every mutant of the group would be 'killed' by a missing file."""
    if subprocess.run(["git", "-C", str(REPO), "rev-parse"], capture_output=True).returncode:
        pytest.skip("the mutation tool lists the checkout's files with git: not a git checkout")
    import tomllib

    mutation = _mutation_module()
    mutation.stage(tmp_path, mutation.GROUPS["editkit"], None)
    readme = "plugins/editors/size/README.md"
    assert (tmp_path / readme).read_text() == (REPO / readme).read_text()
    copied = tomllib.loads((tmp_path / "pyproject.toml").read_text())["tool"]["mutmut"]["also_copy"]
    assert "plugins/editors/size/tests" in copied and readme in copied
    assert copied.index("plugins/editors/size/tests") < copied.index(readme)  # its folder first


@pytest.mark.parametrize("path", ["core/no_such_module.py", "README.md",
                                  "plugins/attacks/dla/segtk_dla/attack.py"])
def test_a_module_that_cannot_be_staged_is_refused(path: str) -> None:
    with pytest.raises(ValueError, match="--module"):
        _mutation_module().module_group([path], [])

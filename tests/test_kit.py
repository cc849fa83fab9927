"""The test kit is light: pytest's start-up with segtk installed imports neither torch nor
hypothesis (the pytest11 plugin and segtk.testing import on first use), and hypothesis is a
test extra, not a dependency of segtk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import segtk.testing

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "hypothesis", "numpy", "segtk.core")

# Records, once pytest has collected, which heavy modules the run had imported so far.
CONFTEST = f'''
import json, sys

def pytest_collection_finish(session):
    with open("modules.json", "w") as fh:
        json.dump({{"heavy": sorted(m for m in {HEAVY!r} if m in sys.modules),
                   "segtk": session.config.pluginmanager.has_plugin("segtk")}}, fh)
'''


def run_pytest(folder: Path, *args: str) -> dict:
    """A trivial test run in `folder` (no conftest of segtk's): what it had imported."""
    (folder / "conftest.py").write_text(CONFTEST)
    (folder / "test_trivial.py").write_text("def test_nothing():\n    pass\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("PYTEST_ADDOPTS", None)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                         cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    return json.loads((folder / "modules.json").read_text())


def test_pytest_start_up_imports_neither_torch_nor_hypothesis(tmp_path: Path) -> None:
    seen = run_pytest(tmp_path)
    assert seen["segtk"], "segtk's pytest plugin was not loaded (is segtk installed?)"
    assert seen["heavy"] == [], f"pytest start-up imported {seen['heavy']} through segtk's plugin"


def test_a_fixture_imports_what_it_gives_when_asked(tmp_path: Path) -> None:
    (tmp_path / "test_fixture.py").write_text(
        "import sys\n\n"
        "def test_toy_sample(toy_sample):\n"
        "    assert toy_sample.mask.any() and 'torch' in sys.modules\n")
    seen = run_pytest(tmp_path)
    assert seen["heavy"] == []  # collected, not yet run


def run_python(code: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", f"import sys\n{code}\nprint(sorted(m for m in "
                          f"{HEAVY!r} if m in sys.modules))"],
                         capture_output=True, text=True, timeout=300, env={**os.environ,
                                                                            "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr
    return eval(out.stdout.strip().splitlines()[-1])


def test_segtk_testing_imports_a_name_on_first_use() -> None:
    assert run_python("import segtk.testing") == []
    assert "hypothesis" not in run_python("from segtk.testing import FilterSuite, toy_sample")
    assert "hypothesis" in run_python("from segtk.testing import AttackSuite")


def test_every_name_of_segtk_testing_imports() -> None:
    for name in segtk.testing.__all__:
        assert getattr(segtk.testing, name) is not None, name
    assert set(segtk.testing.__all__) <= set(dir(segtk.testing))


def test_hypothesis_is_a_test_extra_not_a_dependency() -> None:
    tomllib = pytest.importorskip("tomllib", reason="tomllib comes with Python 3.11")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = [d.split(">")[0].split("=")[0].split("<")[0].strip() for d in project["dependencies"]]
    assert "hypothesis" not in names
    assert any(d.startswith("hypothesis") for d in project["optional-dependencies"]["test"])

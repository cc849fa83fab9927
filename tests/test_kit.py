"""The test kit is light: pytest's start-up with segtk installed imports neither torch nor
hypothesis (the pytest11 plugin and segtk.testing import on first use), and hypothesis is a
test extra, not a dependency of segtk."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import segtk.testing
from segtk.core import registry

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
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = [d.split(">")[0].split("=")[0].split("<")[0].strip() for d in project["dependencies"]]
    assert "hypothesis" not in names
    assert any(d.startswith("hypothesis") for d in project["optional-dependencies"]["test"])


# --- every plugin of the repository is checked by its kind's suite ----------------------------


def hooks_of(package: Path) -> set[str]:
    """The register_* hooks a plugin package implements (functions marked @hookimpl)."""
    found = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("register_") and any(
                    (d.id if isinstance(d, ast.Name) else getattr(d, "attr", "")) == "hookimpl"
                    for d in node.decorator_list):
                found.add(node.name)
    return found


def suites_used(tests: Path) -> set[str]:
    """The segtk.testing suites some class of the test files subclasses (through local bases)."""
    bases: dict[str, set[str]] = {}
    for path in tests.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases.setdefault(node.name, set()).update(
                    b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases)

    def ancestors(name: str, seen: frozenset[str] = frozenset()) -> set[str]:
        out = set(bases.get(name, set()))
        for base in out - seen:
            out |= ancestors(base, seen | {name})
        return out

    return {b for name in bases for b in ancestors(name)}


def missing_suites(root: Path) -> list[str]:
    suite_of = {k.hook: k.suite for k in registry.KINDS}
    missing = []
    for folder in sorted(p for p in root.glob("*/*") if p.is_dir()):
        packages = [p for p in folder.glob("segtk_*") if p.is_dir() and not p.name.endswith("info")]
        hooks = set().union(*(hooks_of(p) for p in packages)) & set(suite_of)
        used = suites_used(folder / "tests") if (folder / "tests").is_dir() else set()
        missing += [f"{folder.relative_to(root).as_posix()}: no test subclasses {suite_of[h]} ({h})"
                    for h in sorted(hooks) if suite_of[h] not in used]
    return missing


def test_every_plugin_subclasses_its_kinds_suite() -> None:
    assert len(list((ROOT / "plugins").glob("*/*/tests"))) > 25
    assert missing_suites(ROOT / "plugins") == []


def test_the_suite_check_finds_a_plugin_without_its_suite(tmp_path: Path) -> None:
    plugin = tmp_path / "editors" / "glow"
    (plugin / "segtk_glow").mkdir(parents=True)
    (plugin / "tests").mkdir()
    (plugin / "segtk_glow" / "__init__.py").write_text(
        "from segtk.core import hookimpl\n\n@hookimpl\ndef register_editors(register):\n    pass\n\n"
        "@hookimpl\ndef register_edit_backends(register):\n    pass\n")
    (plugin / "tests" / "test_glow.py").write_text(
        "class Base(EditorSuite):\n    pass\n\nclass TestGlow(Base):\n    pass\n")
    assert missing_suites(tmp_path) == [
        "editors/glow: no test subclasses EditBackendSuite (register_edit_backends)"]

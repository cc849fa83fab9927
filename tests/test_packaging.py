"""One package, no leaks: only the packages pyproject lists import as `segtk.*` (the other
folders of the source tree — tests, docs, bench, plugins, ... — do not, in an editable install
as in a wheel), each plugin is one module with one set of classes, and the built wheel holds
segtk's packages with their data and nothing else."""

from __future__ import annotations

import importlib
import importlib.metadata
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]
PACKAGES: list[str] = SETUPTOOLS["packages"]
# Folders of the source tree that are not part of package segtk.
NOT_SEGTK = ["plugins", "bench", "docs", "scripts", "tests", "models", "extras"]
# What the source tree holds beside segtk's packages and that no wheel carries.
SCRATCH = shutil.ignore_patterns(".git", ".*cache", ".hypothesis", ".venv*", "__pycache__",
                                 "*.egg-info", "build", "dist", "runs", "out")


def folders() -> list[Path]:
    return sorted(p for p in ROOT.iterdir()
                  if p.is_dir() and not p.name.startswith((".", "__")) and "." not in p.name)


def test_pyproject_lists_every_package_of_the_root() -> None:
    """A folder with `__init__.py` imports as segtk.NAME in an editable install; the wheel
    carries it only if pyproject lists it (and a listed folder must exist, or no build works)."""
    regular = {f"segtk.{p.name}" for p in folders() if (p / "__init__.py").exists()}
    assert sorted(PACKAGES) == sorted({"segtk", *regular})
    for name in PACKAGES:
        importlib.import_module(name)


@pytest.mark.parametrize("name", NOT_SEGTK)
def test_other_folders_do_not_import_as_segtk(name: str) -> None:
    assert (ROOT / name).is_dir() and f"segtk.{name}" not in PACKAGES
    with pytest.raises(ModuleNotFoundError, match=f"segtk.{name}.*not part of package segtk"):
        importlib.import_module(f"segtk.{name}")


def test_every_folder_that_is_no_package_is_refused() -> None:
    others = [p.name for p in folders() if f"segtk.{p.name}" not in PACKAGES]
    assert set(NOT_SEGTK) <= set(others)
    for name in others:
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(f"segtk.{name}")


def test_a_plugin_is_one_module_with_one_class_object() -> None:
    """Through its entry point and by name, the DLA plugin is one module; the path that
    reaches its folder through the source tree (`segtk.plugins....`) is refused."""
    (entry,) = [e for e in importlib.metadata.entry_points(group="segtk") if e.name == "dla"]
    module = importlib.import_module("segtk_dla")
    assert entry.load() is module
    with pytest.raises(ModuleNotFoundError, match="segtk.plugins"):
        importlib.import_module("segtk.plugins.attacks.dla.segtk_dla")
    assert [m for m in sys.modules if m.startswith("segtk.plugins")] == []


def test_every_plugin_path_through_the_tree_is_refused() -> None:
    for package in sorted(ROOT.glob("plugins/*/*/segtk_*/__init__.py")):
        dotted = ".".join(["segtk", *package.parent.relative_to(ROOT).parts])
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(dotted)


def expected_files(root: Path) -> set[str]:
    """Every file the wheel must carry: the root's modules and stubs with its package data, and
    every file of the other listed packages (modules, templates, py.typed: all of it is theirs)."""
    data: list[str] = SETUPTOOLS.get("package-data", {}).get("segtk", [])
    files = [*root.glob("*.py"), *root.glob("*.pyi"), *(f for d in data for f in root.glob(d))]
    for package in [p for p in PACKAGES if p != "segtk"]:
        folder = root.joinpath(*package.split(".")[1:])
        files += [f for f in folder.rglob("*") if f.is_file() and "__pycache__" not in f.parts]
    return {"/".join(["segtk", *f.relative_to(root).parts]) for f in files}


def test_the_wheel_holds_segtks_packages_and_nothing_else(tmp_path: Path) -> None:
    """`pip wheel` (offline: no build isolation, no dependencies) on a copy of the source tree;
    the wheel's files are exactly the listed packages' modules and data."""
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=SCRATCH)
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps",
                    "--no-build-isolation", "--no-index", "-q", "-w", str(tmp_path / "dist")],
                   check=True, capture_output=True, text=True, cwd=tmp_path)
    (wheel,) = (tmp_path / "dist").glob("segtk-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    files = {n for n in names if not n.startswith("segtk-")}
    version = PYPROJECT["project"]["version"]
    assert {n.split("/")[0] for n in names} == {"segtk", f"segtk-{version}.dist-info"}
    assert files == expected_files(source)
    assert {"segtk/py.typed", "segtk/cli.py", "segtk/reports/templates/base.html.j2"} <= files
    leaked = [n for n in files if n.split("/")[1] in NOT_SEGTK]
    assert leaked == []


def test_every_distribution_requires_python_311() -> None:
    """segtk, each plugin and the scaffold's template (typing.Self and tomllib are 3.11's)."""
    files = [ROOT / "pyproject.toml", *sorted(ROOT.glob("plugins/*/*/pyproject.toml")),
             ROOT / "commands" / "scaffold_templates" / "common" / "pyproject.toml.tmpl"]
    wrong = [str(f.relative_to(ROOT)) for f in files
             if 'requires-python = ">=3.11"' not in f.read_text()]
    assert wrong == []
    assert PYPROJECT["tool"]["ruff"]["target-version"] == "py311"

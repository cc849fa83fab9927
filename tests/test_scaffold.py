"""`segtk plugins new KIND NAME`: clear refusals, and scaffolds that install for real (into a
folder of their own, never the base environment), register through their entry point and pass
their contract suite."""

from __future__ import annotations

import ast
import importlib.metadata
import inspect
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

import segtk.testing
from segtk.cli import cli
from segtk.commands.scaffold import KINDS, TEMPLATES, about, names, render
from segtk.core import SegtkError, registry

SUITES = {kind: getattr(segtk.testing, KINDS[kind].suite) for kind in KINDS}


def test_every_kind_has_a_scaffold_and_a_suite() -> None:
    """The table of kinds drives `plugins new`: every kind, its template and its suite."""
    assert list(KINDS) == [k.name for k in registry.KINDS]
    for kind in KINDS:
        assert (TEMPLATES / KINDS[kind].template / "tests").is_dir(), kind
        assert about(kind).description and about(kind).usage


def test_names_in_each_spelling() -> None:
    n = names("my-noise2")
    assert (n.name, n.dist, n.package, n.cls) == ("my-noise2", "segtk-my-noise2",
                                                  "segtk_my_noise2", "MyNoise2")


@pytest.mark.parametrize("bad", ["", "Noise", "my_noise", "9lives", "-a", "a-", "a--b", "a b",
                                 "x" * 41, "segtk", "segtk-noise", "noise!"])
def test_bad_names_are_refused_with_a_hint(bad: str) -> None:
    with pytest.raises(SegtkError) as err:
        names(bad)
    assert err.value.hint


@pytest.mark.parametrize("kind", list(KINDS))
def test_rendered_files_parse_and_name_the_entry_point(kind: str) -> None:
    files = render(kind, "kit-x")
    package = "segtk_kit_x"
    assert set(files) == {Path("README.md"), Path("pyproject.toml"),
                          Path(package, "__init__.py"), Path(package, f"{about(kind).module}.py"),
                          Path("tests", f"test_{package}.py")}
    project = files[Path("pyproject.toml")]  # valid TOML: pip reads it in the install test
    assert 'name = "segtk-kit-x"' in project and f'packages = ["{package}"]' in project
    assert f'[project.entry-points.segtk]\nkit-x = "{package}"\n' in project
    for path, text in files.items():
        if path.suffix == ".py":
            tree = ast.parse(text, str(path))
            imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
            imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
            segtk = {m for m in imported if m and m.split(".")[0] == "segtk"}
            public = ("segtk.core", "segtk.editkit")  # the public packages a plugin builds on
            allowed = (*public, "segtk.testing") if path.parts[0] == "tests" else public
            assert all(m.startswith(allowed) for m in segtk), f"{path} imports {segtk}"
        assert "$" not in text.replace("ε", ""), f"{path}: an unfilled placeholder"
    assert KINDS[kind].suite in files[Path("tests", f"test_{package}.py")]


def test_each_scaffold_implements_its_kinds_hook() -> None:
    """A model scaffold answers `register_models`, the kind's one hook (its former name warns)."""
    for kind in KINDS:
        init = render(kind, "kit-x")[Path("segtk_kit_x", "__init__.py")]
        hooks = {f.name for f in ast.walk(ast.parse(init)) if isinstance(f, ast.FunctionDef)}
        assert hooks == {KINDS[kind].hook}, (kind, hooks)
    with pytest.raises(SegtkError, match="the plugin kind 'segmenter' is called 'model'"):
        render("segmenter", "kit-x")


def test_cli_refuses_a_bad_kind_a_bad_name_and_an_existing_folder(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["plugins", "new", "modle", "x", "--out", str(tmp_path / "a")])
    assert result.exit_code == 2 and "'modle' is not one of" in result.output
    result = runner.invoke(cli, ["plugins", "new", "segmenter", "x", "--out", str(tmp_path / "a")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "the plugin kind 'segmenter' is called 'model': use 'model'" in result.output
    result = runner.invoke(cli, ["plugins", "new", "attack", "My_Noise", "--out", str(tmp_path / "b")])
    assert result.exit_code == 1 and "'My_Noise' cannot be a plugin name" in result.output
    assert "hint:" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    existing = tmp_path / "mine"
    existing.mkdir()
    (existing / "keep.txt").write_text("mine")
    result = runner.invoke(cli, ["plugins", "new", "filter", "ok", "--out", str(existing)])
    assert result.exit_code == 1 and "already exists" in result.output
    assert [p.name for p in existing.iterdir()] == ["keep.txt"]


@pytest.mark.parametrize("kind,name,taken_by", [
    ("attack", "random", ["attack plugin 'random' (segtk-attack-random)", "package segtk_random"]),
    ("filter", "camvid", ["dataset plugin 'camvid' (segtk)"]),  # another kind's plugin name
    ("editor", "lonely", ["distribution segtk-lonely"]),  # installed, but no plugin, no package
])
def test_a_name_in_use_is_refused_naming_who_uses_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     kind: str, name: str, taken_by: list[str]) -> None:
    info = tmp_path / "site" / "segtk_lonely-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: segtk-lonely\nVersion: 1.0\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    result = CliRunner().invoke(cli, ["plugins", "new", kind, name, "--out", str(tmp_path / "p")])
    assert result.exit_code == 1 and "Traceback" not in result.output
    error = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(error) == 1 and f"the name {name!r} is taken" in error[0]
    assert all(who in error[0] for who in taken_by)
    assert f"e.g. my-{name}" in result.output  # a free name is suggested
    assert not (tmp_path / "p").exists()


def test_cli_default_folder_is_segtk_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["plugins", "new", "filter", "tiny-things"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "segtk-tiny-things" / "segtk_tiny_things" / "filter.py").is_file()
    assert "pip install -e" in result.output


# --- the real thing: install each kind and run its tests in a fresh interpreter --------------


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Scaffold one plugin of each kind, pip-install them into a folder of their own, run their
    tests and `segtk plugins --json` in subprocesses that see that folder on PYTHONPATH (so
    importlib.metadata finds their entry points)."""
    root = tmp_path_factory.mktemp("scaffold")
    sources = []
    for kind in KINDS:
        out = root / "src" / f"kit-{kind}"
        result = CliRunner().invoke(cli, ["plugins", "new", kind, f"kit-{kind}", "--out", str(out)])
        assert result.exit_code == 0, result.output
        sources.append(out)
    site = root / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                          "--no-build-isolation", "--no-compile", "--disable-pip-version-check",
                          "--target", str(site), *map(str, sources)],
                         capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stderr
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1", "SEGTK_LOAD_PLUGINS": ",".join(f"kit-{k}" for k in KINDS)}
    env.pop("PYTEST_ADDOPTS", None)
    junit = root / "junit.xml"
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            f"--junitxml={junit}", *(str(s / "tests") for s in sources)],
                           cwd=root, env=env, capture_output=True, text=True, timeout=600)
    listing = subprocess.run([sys.executable, "-m", "segtk.cli", "plugins", "--json"],
                             cwd=root, env=env, capture_output=True, text=True, timeout=300)
    return {"site": site, "tests": tests, "junit": junit, "listing": listing}


@pytest.mark.slow
def test_scaffolds_install_beside_the_base_environment(installed: dict) -> None:
    site = installed["site"]
    for kind in KINDS:
        assert (site / names(f"kit-{kind}").package).is_dir()
        with pytest.raises(importlib.metadata.PackageNotFoundError):
            importlib.metadata.distribution(f"segtk-kit-{kind}")  # not in this interpreter's env


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(KINDS))
def test_scaffold_passes_its_contract_suite(installed: dict, kind: str) -> None:
    run = installed["tests"]
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    cases = ET.parse(installed["junit"]).getroot().iter("testcase")
    module = f"test_{names(f'kit-{kind}').package}"
    mine = [c for c in cases if module in c.get("classname", "").split(".")]
    assert mine and not any(c.find("failure") is not None or c.find("error") is not None
                            for c in mine)
    # A check may be skipped only by the suite itself, for a plugin it does not apply to (an
    # attack that returns its best candidate has no iterate to check), never by the plugin.
    suite_file = Path(inspect.getfile(SUITES[kind])).name
    skipped = [s for c in mine if (s := c.find("skipped")) is not None]
    assert all(suite_file in (s.text or "") + s.get("message", "") for s in skipped), \
        [(s.get("message"), s.text) for s in skipped]
    stem = names(f"kit-{kind}").cls
    checks = {n for n, _ in inspect.getmembers(SUITES[kind]) if n.startswith("test_")}
    ran = {c.get("name", "") for c in mine if c.get("classname", "").endswith(f".Test{stem}")}
    assert {r.split("[")[0] for r in ran} == checks  # the whole suite ran, through pytest


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(KINDS))
def test_scaffold_is_listed_ok_by_segtk_plugins(installed: dict, kind: str) -> None:
    run = installed["listing"]
    assert run.returncode == 0, run.stderr[-2000:]
    rows = [r for r in json.loads(run.stdout) if r["name"] == f"kit-{kind}"]
    assert len(rows) == 1, rows
    assert (rows[0]["kind"], rows[0]["status"], rows[0]["distribution"]) == \
        (kind, "ok", f"segtk-kit-{kind}")

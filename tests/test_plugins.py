"""Plugin discovery through real entry points: third-party, broken and missing-dependency plugins."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from segtk.core import registry
from segtk.core.errors import PluginError
from segtk.core.plugins import get_plugin_manager, reset_plugin_manager
from segtk.testing import TinySegmenter, toy_batch

HELLO = '''
from segtk.core.attack import Attack, project
from segtk.core.hookspecs import hookimpl
from segtk.core.registry import SegmenterPlugin


class Hello(Attack):
    """Queries the clean image, then one ±ε checkerboard."""
    name = "hello"

    def attack(self, oracle):
        oracle.query(oracle.clean)
        if len(oracle.active()):
            x = oracle.clean
            sign = ((x * 0).long().add(1).cumsum(-1) % 2) * 2 - 1
            oracle.query(project(x + oracle.eps_unit * sign, x, oracle.eps_unit))


@hookimpl
def register_attacks(register):
    register(Hello)


@hookimpl
def register_segmenters(register):
    register(SegmenterPlugin("needs-xyz", lambda arg: None, "needs-xyz", "--model needs-xyz",
                             requires=("segtk_no_such_module_xyz",), install="pip install xyz"))
'''


def make_distribution(root: Path, dist: str, module: str, source: str) -> None:
    """A real installed distribution: a module plus a .dist-info with an entry point."""
    (root / f"{module}.py").write_text(source)
    info = root / f"{dist.replace('-', '_')}-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.2.3\n")
    (info / "entry_points.txt").write_text(f"[segtk]\n{module} = {module}\n")


@pytest.fixture
def third_party(tmp_path: Path, monkeypatch):
    make_distribution(tmp_path, "segtk-hello", "segtk_hello", textwrap.dedent(HELLO))
    make_distribution(tmp_path, "segtk-broken", "segtk_broken", "import segtk_missing_dep_abc\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("SEGTK_LOAD_PLUGINS", raising=False)
    reset_plugin_manager()
    yield tmp_path
    reset_plugin_manager()
    sys.modules.pop("segtk_hello", None)


def test_third_party_attack_is_listed_and_usable(third_party) -> None:
    info = {(i.kind, i.name): i for i in registry.plugins()}
    hello = info[("attack", "hello")]
    assert (hello.status, hello.distribution, hello.version) == ("ok", "segtk-hello", "1.2.3")
    images, labels = toy_batch(1)
    result = registry.attack("hello")(budget=2).run(TinySegmenter(), images, labels)
    assert result.queries.tolist() == [2]


def test_broken_plugin_is_listed_and_the_rest_still_works(third_party) -> None:
    broken = [i for i in registry.plugins() if i.name == "segtk_broken"]
    assert broken and broken[0].status == "broken"
    assert "segtk_missing_dep_abc" in broken[0].error
    assert registry.attack("hello") is not None


def test_missing_dependency_is_reported_and_refused(third_party) -> None:
    info = [i for i in registry.plugins() if i.name == "needs-xyz"][0]
    assert info.status == "missing dependency" and info.missing == ["segtk_no_such_module_xyz"]
    with pytest.raises(PluginError, match="needs segtk_no_such_module_xyz") as exc:
        registry.segmenter_plugin("needs-xyz")
    assert exc.value.hint == "pip install xyz"


def test_unknown_plugin_names_what_is_installed(third_party) -> None:
    with pytest.raises(PluginError, match="no attack plugin named 'nope'") as exc:
        registry.attack("nope")
    assert "hello" in exc.value.hint


def test_load_plugins_env_restricts_entry_points(third_party, monkeypatch) -> None:
    monkeypatch.setenv("SEGTK_LOAD_PLUGINS", "segtk_hello")
    reset_plugin_manager()
    names = {i.name for i in registry.plugins()}
    assert "hello" in names and "segtk_broken" not in names and "dla" not in names
    monkeypatch.setenv("SEGTK_LOAD_PLUGINS", "")
    reset_plugin_manager()
    assert not get_plugin_manager().distributions.keys() - {"segtk.datasets"}


def test_cli_plugins_json_lists_builtins_ok_and_broken(third_party) -> None:
    env = {**os.environ, "PYTHONPATH": f"{third_party}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = subprocess.run([sys.executable, "-m", "segtk.cli", "plugins", "--json"], env=env,
                         capture_output=True, text=True, check=True).stdout
    rows = {r["name"]: r for r in json.loads(out)}
    assert rows["dla"]["status"] == "ok" and rows["dla"]["distribution"] == "segtk-attack-dla"
    assert rows["segtk_broken"]["status"] == "broken"
    assert rows["hello"]["status"] == "ok"

"""Discoverable adapters and parameters: `segtk models` cuts nothing at 80 or 120 columns,
`segtk models NAME` and `segtk plugins show NAME` print the full syntax, every parameter (type
and default as the plugin declares them, one-line meaning) and examples that run; `--json` for
each; a mistyped name is one line with a "did you mean"."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from segtk.cli import cli
from segtk.commands.console import shell_safe
from segtk.commands.plugins import param_docs
from segtk.core import load_dataset, registry
from segtk_dla import DLAParams
from segtk_square import SquareParams


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


# what a terminal of 80 and 120 columns shows (rich reads COLUMNS when it starts): each command
# once, all in one process per width
SCREENS = {80: [["models"], ["datasets"], ["models", "hf"], ["plugins", "show", "dla"],
                ["plugins", "show", "square"]], 120: [["models"]]}
END = "<<<end of command>>>"
RUN_ALL = f"""
import json, sys
from segtk.cli import cli
for args in json.loads(sys.argv[1]):
    try:
        cli.main(args, prog_name="segtk", standalone_mode=False)
    finally:
        print({END!r}, flush=True)
"""


@pytest.fixture(scope="module")
def screens() -> dict[tuple[int, str], str]:
    out = {}
    for columns, commands in SCREENS.items():
        env = {**os.environ, "COLUMNS": str(columns), "OMP_NUM_THREADS": "1"}
        done = subprocess.run([sys.executable, "-c", RUN_ALL, json.dumps(commands)], env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        for args, text in zip(commands, done.stdout.split(END + "\n"), strict=False):
            out[columns, " ".join(args)] = text
    return out


def table_rows(text: str) -> list[list[str]]:
    """The cells of a rich table's rows, each cell's folded or wrapped lines joined without
    whitespace (a row starts where its first cell is not empty)."""
    rows: list[list[list[str]]] = []
    for line in text.splitlines():
        if not line.startswith("│"):
            continue
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if cells[0] or not rows:
            rows.append([[] for _ in cells])
        for pieces, cell in zip(rows[-1], cells, strict=True):
            pieces.append(cell)
    return [[squash("".join(pieces)) for pieces in row] for row in rows]


def squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def segmenters() -> list[registry.PluginInfo]:
    return [i for i in registry.plugins() if i.kind == "model" and i.obj is not None]


@pytest.mark.parametrize("columns", [80, 120])
def test_models_cuts_no_syntax_and_no_example(columns, screens) -> None:
    out = screens[columns, "models"]
    assert max(len(line) for line in out.splitlines() if line.startswith("│")) <= columns
    rows = {row[0]: row for row in table_rows(out)}
    for info in segmenters():
        assert rows[info.name][1] == squash(info.obj.syntax), info.name
        assert rows[info.name][2] == squash(shell_safe(info.obj.example)), info.name  # as pasted
    assert "…" not in out and "segtk models NAME" in out


def test_datasets_cuts_nothing_at_80_columns(screens) -> None:
    out = screens[80, "datasets"]
    rows = {row[0]: row for row in table_rows(out)}
    for info in (i for i in registry.plugins() if i.kind == "dataset"):
        assert rows[info.name][1:3] == [squash(info.obj.syntax), squash(info.obj.example)]


def test_models_name_prints_the_whole_syntax_on_one_line_at_80_columns(screens) -> None:
    info = registry.segmenter_plugin("hf")
    assert len(info.syntax) > 80
    lines = screens[80, "models hf"].splitlines()
    assert f"  syntax: {info.syntax}" in lines
    assert f"  example: segtk predict {info.example}" in lines


@pytest.mark.parametrize("params_cls,name", [(DLAParams, "dla"), (SquareParams, "square")])
def test_plugins_show_lists_every_parameter_as_the_dataclass_declares_it(params_cls, name, screens) -> None:
    result = invoke("plugins", "show", name, "--json")
    assert result.exit_code == 0, result.output
    (shown,) = json.loads(result.output)
    defaults = params_cls()
    fields = [f for f in dataclasses.fields(params_cls) if f.init]
    assert [p["name"] for p in shown["parameters"]] == [f.name for f in fields]
    for p, f in zip(shown["parameters"], fields, strict=True):
        assert p["type"] == f.type  # the annotation as written (postponed: text)
        assert p["default"] == getattr(defaults, f.name)
    own = [f.name for f in fields if f.name not in {g.name for g in dataclasses.fields(params_cls.__base__)}]
    docstring = squash(params_cls.__doc__)
    for p in shown["parameters"]:
        if p["name"] in own:  # the plugin's own knobs: meaning from its docstring, via --param
            assert p["doc"] and squash(p["doc"]) in docstring, p
            assert p["set_with"] == f"--param {p['name']}=VALUE"
    assert {p["name"]: p["set_with"] for p in shown["parameters"]}["budget"] == "--budget"
    text = screens[80, f"plugins show {name}"]
    rows = {row[0]: row for row in table_rows(text)}
    for p in shown["parameters"]:
        assert rows[p["name"]][1:3] == [squash(p["type"]), squash("none" if p["default"] is None
                                                                 else str(p["default"]))]


@pytest.mark.parametrize("name", sorted(i.name for i in registry.plugins() if i.kind == "attack"))
def test_every_parameter_of_a_built_in_attack_has_a_meaning(name) -> None:
    (shown,) = json.loads(invoke("plugins", "show", name, "--kind", "attack", "--json").output)
    assert shown["parameters"] and all(p["doc"] for p in shown["parameters"]), shown["parameters"]


def test_plugins_show_json_shapes() -> None:
    (dla,) = json.loads(invoke("plugins", "show", "dla", "--json").output)
    assert set(dla) == {"name", "kind", "distribution", "version", "status", "description",
                        "parameters", "examples"}
    assert (dla["kind"], dla["distribution"], dla["status"]) == ("attack", "segtk-attack-dla", "ok")
    assert all(set(p) == {"name", "type", "default", "doc", "set_with"} for p in dla["parameters"])
    both = json.loads(invoke("plugins", "show", "demo", "--json").output)
    assert sorted(d["kind"] for d in both) == ["dataset", "model"]
    (model,) = json.loads(invoke("plugins", "show", "demo", "--kind", "model", "--json").output)
    assert model == json.loads(invoke("models", "demo", "--json").output)
    assert set(model) == {"name", "kind", "distribution", "version", "status", "description",
                          "syntax", "example", "classes", "examples"}
    listing = json.loads(invoke("models", "--json").output)
    assert [m["name"] for m in listing] == [i.name for i in registry.plugins() if i.kind == "model"]
    assert all(m["syntax"] == registry.segmenter_plugin(m["name"]).syntax
               for m in listing if m["status"] == "ok")
    readers = json.loads(invoke("datasets", "--json").output)
    assert [(d["name"], d["kind"], d["syntax"]) for d in readers] == [
        (i.name, "dataset", i.obj.syntax) for i in registry.plugins() if i.kind == "dataset"]


def test_datasets_spec_lists_the_classes(tmp_path: Path) -> None:
    data = load_dataset("demo")
    shown = json.loads(invoke("datasets", "demo", "--json").output)
    assert shown["classes"] == data.classes and shown["ignore_index"] == data.ignore_index
    rows = table_rows(invoke("datasets", "demo").output)
    assert rows == [[str(i), squash(c)] for i, c in enumerate(data.classes)]


@pytest.mark.parametrize("args,message", [
    (["plugins", "show", "dal"], "no plugin named 'dal' (did you mean 'dla'?)"),
    (["plugins", "show", "sqare", "--kind", "attack"], "no attack plugin named 'sqare' (did you mean 'square'?)"),
    (["plugins", "show", "zzzzzz"], "no plugin named 'zzzzzz'\n"),
    (["models", "espnt"], "no model adapter named 'espnt' (did you mean 'espnet'?)"),
    (["datasets", "nosuchformat:x"], "no dataset plugin named 'nosuchformat'"),
])
def test_an_unknown_name_is_one_line_with_a_suggestion(args, message) -> None:
    result = invoke(*args)
    assert result.exit_code == 1
    assert message in result.output and "hint:" in result.output
    assert "Traceback" not in result.output


def test_the_attack_example_runs(tmp_path: Path) -> None:
    (shown,) = json.loads(invoke("plugins", "show", "square", "--json").output)
    args = shlex.split(shown["examples"][0])[1:]  # without "segtk"
    result = invoke(*args, "--budget", "3", "--limit", "1", "--no-save-images",
                    "--out", str(tmp_path / "a"))
    assert result.exit_code == 0, result.output


def test_param_docs_from_metadata_docstrings_and_bases() -> None:
    @dataclasses.dataclass
    class Base:
        """`shared`: set for all. Second sentence."""

        shared: int = 1

    @dataclasses.dataclass
    class Params(Base):
        """Knobs.

        alpha: the first knob, e.g. 0.5 or Eq. 3; beta: the second
            one, wrapped. More text.
        """

        alpha: float = 0.5
        beta: str = "x"
        gamma: int = dataclasses.field(default=2, metadata={"doc": "from the field"})
        delta: int = 0

    class Plugin:
        pass

    Plugin.Params = Params  # type: ignore[attr-defined]
    assert param_docs(Plugin) == {"shared": "set for all", "alpha": "the first knob, e.g. 0.5 or Eq. 3",
                                  "beta": "the second one, wrapped", "gamma": "from the field"}

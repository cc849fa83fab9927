"""A lazy start: `segtk --help` imports neither torch nor a plugin, a command imports only the
plugins it uses (each run in a fresh interpreter: sys.modules tells what was imported)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from segtk.cli import COMMANDS, load_command

# Runs the CLI in-process with the given arguments, then prints the top-level modules imported.
PROBE = """
import json, sys
from segtk.cli import main
written = sys.argv[2]
sys.argv = ["segtk", *json.loads(sys.argv[1])]
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
with open(written, "w") as report:
    json.dump({"code": code, "modules": sorted({m.split(".")[0] for m in sys.modules})}, report)
"""


def imported(*args: str, cwd: Path) -> tuple[str, list[str]]:
    """The output of `segtk ARGS` and the top-level modules it imported."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("SEGTK_LOAD_PLUGINS", None)
    written = cwd / "imported.json"
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(args), str(written)],
                          capture_output=True, text=True, env=env, cwd=cwd, timeout=600)
    assert written.exists(), done.stdout + done.stderr
    report = json.loads(written.read_text())
    assert report["code"] == 0, done.stdout + done.stderr
    return done.stdout, report["modules"]


def plugin_modules(modules: list[str]) -> set[str]:
    return {m for m in modules if m.startswith("segtk_")}


def test_help_imports_neither_torch_nor_any_plugin(tmp_path) -> None:
    output, modules = imported("--help", cwd=tmp_path)
    assert "torch" not in modules and not plugin_modules(modules)
    for name in COMMANDS:
        assert f"  {name} " in output
    for ep in importlib.metadata.entry_points(group="segtk.commands"):  # e.g. serve, listed unimported
        assert f"  {ep.name} " in output


@pytest.mark.parametrize("command", [*sorted(COMMANDS), "bench attacks", "plugins show"])
def test_a_commands_help_imports_no_plugin(command, tmp_path) -> None:
    output, modules = imported(*command.split(), "--help", cwd=tmp_path)
    assert "Usage: segtk" in output and not plugin_modules(modules)


def test_a_run_of_one_attack_imports_only_that_attack_and_the_model(tmp_path) -> None:
    output, modules = imported("attack", "--plugin", "random", "--limit", "1", "--budget", "2",
                               "--out", str(tmp_path / "run"), "--no-save-images", cwd=tmp_path)
    assert "dataset mIoU" in output
    assert plugin_modules(modules) == {"segtk_random", "segtk_demo"}  # the demo model and data


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_command_table_shows_each_commands_own_short_help(name) -> None:
    command = load_command(name)
    assert command.name == name
    shown = click.Command(name, help=COMMANDS[name][1])
    assert shown.get_short_help_str(200) == command.get_short_help_str(200)

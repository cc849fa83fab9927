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
sys.argv = ["segtk", *json.loads(sys.argv[1])]
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
print(json.dumps({"code": code, "modules": sorted({m.split(".")[0] for m in sys.modules})}),
      file=sys.stderr)
"""


def imported(*args: str, cwd: Path | None = None) -> tuple[str, list[str]]:
    """The output of `segtk ARGS` and the top-level modules it imported."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("SEGTK_LOAD_PLUGINS", None)
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(args)], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=600)
    report = json.loads(done.stderr.strip().splitlines()[-1])
    assert report["code"] == 0, done.stdout + done.stderr
    return done.stdout, report["modules"]


def plugin_modules(modules: list[str]) -> set[str]:
    return {m for m in modules if m.startswith("segtk_")}


def test_help_imports_neither_torch_nor_any_plugin() -> None:
    output, modules = imported("--help")
    assert "torch" not in modules and not plugin_modules(modules)
    for name in COMMANDS:
        assert f"  {name} " in output
    for ep in importlib.metadata.entry_points(group="segtk.commands"):  # e.g. serve, listed unimported
        assert f"  {ep.name} " in output


def test_a_commands_help_imports_no_plugin() -> None:
    for command in (["attack"], ["bench", "attacks"], ["plugins"]):
        output, modules = imported(*command, "--help")
        assert "Example" in output and not plugin_modules(modules), command


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

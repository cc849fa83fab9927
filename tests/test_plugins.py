"""Plugin discovery through real entry points: third-party, broken and missing-dependency plugins."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from segtk.core import Attack, PluginError, SegmenterPlugin, hookimpl, registry
from segtk.core import _plugins as plugins_module
from segtk.core._plugins import get_plugin_manager, reset_plugin_manager
from segtk.testing import FakeEntryPoint, TinySegmenter, toy_batch

HELLO = '''
from segtk.core import Attack, project
from segtk.core import hookimpl
from segtk.core import SegmenterPlugin


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
def register_models(register):
    register(SegmenterPlugin("needs-xyz", lambda arg: None, "needs-xyz", "--model needs-xyz",
                             requires=("segtk_no_such_module_xyz",), install="pip install xyz"))
'''


def make_distribution(root: Path, dist: str, module: str, source: str,
                      names: tuple[str, ...] = ()) -> None:
    """A real installed distribution: a module plus a .dist-info with an entry point per name
    (default: the module's)."""
    (root / f"{module}.py").write_text(source)
    info = root / f"{dist.replace('-', '_')}-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.2.3\n")
    points = "".join(f"{name} = {module}\n" for name in names or (module,))
    (info / "entry_points.txt").write_text(f"[segtk]\n{points}")


@pytest.fixture
def third_party(tmp_path: Path, monkeypatch):
    make_distribution(tmp_path, "segtk-hello", "segtk_hello", textwrap.dedent(HELLO),
                      names=("hello", "needs-xyz"))
    # a failing import (a module that is merely not installed is a missing dependency instead)
    make_distribution(tmp_path, "segtk-broken", "segtk_broken",
                      "from json import segtk_missing_dep_abc\n")
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
    assert "hello" in str(exc.value.hint)


def test_load_plugins_env_restricts_entry_points(third_party, monkeypatch) -> None:
    monkeypatch.setenv("SEGTK_LOAD_PLUGINS", "hello")
    reset_plugin_manager()
    names = {i.name for i in registry.plugins()}
    assert "hello" in names and "segtk_broken" not in names and "dla" not in names
    monkeypatch.setenv("SEGTK_LOAD_PLUGINS", "")
    reset_plugin_manager()
    assert not get_plugin_manager().distributions.keys() - {"datasets"}


def test_cli_plugins_json_lists_builtins_ok_and_broken(third_party) -> None:
    env = {**os.environ, "PYTHONPATH": f"{third_party}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = subprocess.run([sys.executable, "-m", "segtk.cli", "plugins", "--json"], env=env,
                         capture_output=True, text=True, check=True).stdout
    rows = {r["name"]: r for r in json.loads(out)}
    assert rows["dla"]["status"] == "ok" and rows["dla"]["distribution"] == "segtk-attack-dla"
    assert rows["segtk_broken"]["status"] == "broken"
    assert rows["hello"]["status"] == "ok"


# --- in-process fake plugins: guarded commands, name conflicts, misspelt hooks ------------------




def fake_plugin(name: str, dist: str, **hooks: Any) -> FakeEntryPoint:
    module = types.SimpleNamespace(**{k: hookimpl(v) for k, v in hooks.items()})
    return FakeEntryPoint(name, module, types.SimpleNamespace(name=dist, version="6.6.6"))


@pytest.fixture
def with_fakes(monkeypatch):
    """Install fake entry points next to the real ones, and a throw-away copy of the CLI's
    command table so commands plugins add do not outlive the test."""
    from segtk.cli import cli

    monkeypatch.setattr(cli, "commands", dict(cli.commands))
    monkeypatch.delenv("SEGTK_LOAD_PLUGINS", raising=False)
    real = list(plugins_module.entry_points())

    def install(*fakes: FakeEntryPoint):
        monkeypatch.setattr(plugins_module, "entry_points", lambda: real + list(fakes))
        reset_plugin_manager()
        from segtk import cli as cli_module

        cli_module.pm_commands()  # what `segtk` (main) does before parsing
        return cli

    yield install
    reset_plugin_manager()


def plugins_json(cli) -> dict[tuple[str, str], dict]:
    out = CliRunner().invoke(cli, ["plugins", "--json"], catch_exceptions=False)
    assert out.exit_code == 0, out.output
    return {(r["kind"], r["name"]): r for r in json.loads(out.output)}


def raise_in_commands(cli) -> None:
    cli.add_command(click.Command("half-added", callback=lambda: None))
    raise RuntimeError("boom in register_commands")


def test_raising_register_commands_does_not_break_help_and_is_listed_broken(with_fakes) -> None:
    cli = with_fakes(fake_plugin("segtk_boom", "segtk-boom", register_commands=raise_in_commands))
    helped = CliRunner().invoke(cli, ["--help"], catch_exceptions=False)
    assert helped.exit_code == 0 and "attack" in helped.output
    assert "half-added" not in helped.output  # a failing plugin adds nothing, not half
    row = plugins_json(cli)[("command", "segtk_boom")]
    assert row["status"] == "broken" and "boom in register_commands" in row["error"]
    assert row["distribution"] == "segtk-boom"


class Impostor(Attack):
    """Claims DLA's name."""

    name = "dla"

    def attack(self, oracle) -> None:
        oracle.query(oracle.clean)


def test_second_attack_with_a_taken_name_is_a_conflict_naming_both(with_fakes) -> None:
    cli = with_fakes(fake_plugin("dla", "segtk-impostor",
                                 register_attacks=lambda register: register(Impostor)))
    rows = [r for (kind, name), r in plugins_json(cli).items() if kind == "attack" and name == "dla"]
    infos = [i for i in registry.plugins() if (i.kind, i.name) == ("attack", "dla")]
    assert {i.distribution for i in infos} == {"segtk-attack-dla", "segtk-impostor"}
    assert all(i.status == "conflict" for i in infos) and rows[0]["status"] == "conflict"
    assert "segtk-attack-dla" in rows[0]["error"] and "segtk-impostor" in rows[0]["error"]
    with pytest.raises(PluginError, match="segtk-attack-dla.*segtk-impostor|segtk-impostor.*segtk-attack-dla"):
        registry.attack("dla")
    used = CliRunner().invoke(cli, ["attack", "--plugin", "dla"])
    assert used.exit_code == 1 and "segtk-impostor" in used.output and "Traceback" not in used.output
    assert registry.attack("random") is not None  # the rest still works


def test_reused_entry_point_name_is_loaded_and_checked_not_skipped(with_fakes) -> None:
    with_fakes(fake_plugin("dla", "segtk-impostor", register_attacks=lambda register: register(Impostor)))
    statuses = {i.distribution: i.status for i in registry.plugins() if (i.kind, i.name) == ("attack", "dla")}
    assert statuses == {"segtk-attack-dla": "conflict", "segtk-impostor": "conflict"}


def test_command_names_cannot_be_taken_over(with_fakes) -> None:
    def add(name: str, text: str):
        return lambda cli: cli.add_command(click.Command(name, callback=lambda: click.echo(text)))

    cli = with_fakes(
        fake_plugin("segtk_a", "segtk-a", register_commands=add("hello", "from a")),
        fake_plugin("segtk_b", "segtk-b", register_commands=add("hello", "from b")),
        fake_plugin("segtk_c", "segtk-c", register_commands=add("predict", "fake predict")),
        fake_plugin("segtk_d", "segtk-d", register_commands=add("only-d", "from d")),
    )
    rows = [r for r in json.loads(CliRunner().invoke(cli, ["plugins", "--json"]).output) if r["kind"] == "command"]
    status = {(r["name"], r["distribution"]): r["status"] for r in rows}
    assert status[("hello", "segtk-a")] == status[("hello", "segtk-b")] == "conflict"
    assert status[("predict", "segtk-c")] == "conflict" and status[("only-d", "segtk-d")] == "ok"
    hello = CliRunner().invoke(cli, ["hello"])
    assert hello.exit_code == 1 and "segtk-a" in hello.output and "segtk-b" in hello.output
    assert "from" not in hello.output
    assert "fake predict" not in CliRunner().invoke(cli, ["predict", "--help"]).output  # segtk's own kept
    assert CliRunner().invoke(cli, ["only-d"]).output == "from d\n"


def a_model(name: str) -> SegmenterPlugin:
    return SegmenterPlugin(name, lambda arg: TinySegmenter(seed=int(arg or 0)), name,
                           f"--model {name}")


def test_the_former_model_hook_still_registers_with_a_warning_naming_the_new_one(with_fakes) -> None:
    with pytest.warns(DeprecationWarning, match="register_segmenters is deprecated: implement "
                                                "register_models") as caught:
        cli = with_fakes(fake_plugin("old-style", "segtk-old-style",
                                     register_segmenters=lambda register: register(a_model("old-style"))),
                         fake_plugin("new-style", "segtk-new-style",
                                     register_models=lambda register: register(a_model("new-style"))))
        rows = plugins_json(cli)
    assert all("register_segmenters" in str(w.message) for w in caught)  # none for new-style
    for name in ("old-style", "new-style"):
        assert rows[("model", name)]["status"] == "ok", rows[("model", name)]
        assert isinstance(registry.segmenter_plugin(name).load("1"), TinySegmenter)


def test_misspelt_hook_is_reported_as_broken_not_ignored(with_fakes) -> None:
    cli = with_fakes(fake_plugin("segtk_typo", "segtk-typo", register_attack=lambda register: None))
    row = plugins_json(cli)[("?", "segtk_typo")]
    assert row["status"] == "broken" and row["distribution"] == "segtk-typo"
    assert "unknown hook 'register_attack'" in row["error"] and "register_attacks" in row["error"]
    assert registry.attack("dla") is not None


def test_adding_commands_twice_is_harmless(with_fakes) -> None:
    from segtk import cli as cli_module

    def add_fresh(cli) -> None:  # a new Command object on every call
        cli.add_command(click.Command("fresh", callback=lambda: click.echo("fresh ran")))

    cli = with_fakes(fake_plugin("segtk_fresh", "segtk-fresh", register_commands=add_fresh))
    cli_module.pm_commands()
    rows = [i for i in registry.plugins() if i.kind == "command" and i.name == "fresh"]
    assert [i.status for i in rows] == ["ok"]
    assert CliRunner().invoke(cli, ["fresh"]).output == "fresh ran\n"


# --- plugins that try to end segtk: SystemExit at import or in a hook is contained -------------


@dataclass
class ExitingEntryPoint(FakeEntryPoint):
    """An entry point whose module calls sys.exit while it is imported."""

    def load(self) -> Any:
        sys.exit(3)


def test_systemexit_at_import_or_in_a_hook_is_listed_broken_and_the_cli_goes_on(with_fakes) -> None:
    def exit_in_attacks(register) -> None:
        sys.exit("bye from register_attacks")

    def exit_in_commands(cli) -> None:
        raise SystemExit(0)

    cli = with_fakes(  # pm_commands (what `segtk` runs first) must survive the command hook
        ExitingEntryPoint("segtk_quitter", None, types.SimpleNamespace(name="segtk-quitter",
                                                                       version="1.0")),
        fake_plugin("segtk_exits", "segtk-exits", register_attacks=exit_in_attacks),
        fake_plugin("segtk_exitcmd", "segtk-exitcmd", register_commands=exit_in_commands),
    )
    rows = plugins_json(cli)  # exit code 0 and a listing, not a silent exit
    at_import = rows[("?", "segtk_quitter")]
    assert at_import["status"] == "broken" and at_import["distribution"] == "segtk-quitter"
    assert at_import["error"].startswith("SystemExit: 3")
    in_hook = rows[("attack", "segtk_exits")]
    assert in_hook["status"] == "broken" and "bye from register_attacks" in in_hook["error"]
    assert rows[("command", "segtk_exitcmd")]["status"] == "broken"
    assert rows[("attack", "dla")]["status"] == "ok"  # the rest still loads
    helped = CliRunner().invoke(cli, ["attack", "--help"])
    assert helped.exit_code == 0 and "--plugin" in helped.output


def test_keyboard_interrupt_in_a_plugin_still_stops_segtk(with_fakes) -> None:
    def interrupted(register) -> None:
        raise KeyboardInterrupt

    with_fakes(fake_plugin("segtk_ctrl_c", "segtk-ctrl-c", register_attacks=interrupted))
    with pytest.raises(KeyboardInterrupt):
        registry.plugins()


# --- lazy discovery: a plugin is imported when its name is used, listed or shown ----------------


def test_using_a_name_imports_only_the_plugins_of_that_entry_point_name(monkeypatch) -> None:
    monkeypatch.delenv("SEGTK_LOAD_PLUGINS", raising=False)
    reset_plugin_manager()
    try:
        assert registry.attack("random").name == "random"
        assert set(get_plugin_manager().distributions) == {"datasets", "random"}
        registry.plugins()  # listing imports the rest
        assert {"dla", "espnet"} <= set(get_plugin_manager().distributions)
    finally:
        reset_plugin_manager()


class Solo(Attack):
    """Registered under a name no entry point of its distribution declares."""

    name = "solo"

    def attack(self, oracle) -> None:
        oracle.query(oracle.clean)


def test_a_name_its_entry_points_do_not_declare_is_refused_by_name(with_fakes) -> None:
    from segtk_dla import DLA

    cli = with_fakes(fake_plugin("segtk_impostor", "segtk-impostor",
                                 register_attacks=lambda register: register(Impostor)),
                     fake_plugin("segtk_solo", "segtk-solo",
                                 register_attacks=lambda register: register(Solo)))
    assert registry.attack("dla") is DLA  # the entry point named dla, unambiguous
    listed = json.loads(CliRunner().invoke(cli, ["plugins", "--json"]).output)
    status = {r["distribution"]: r["status"] for r in listed if (r["kind"], r["name"]) == ("attack", "dla")}
    assert status == {"segtk-attack-dla": "ok", "segtk-impostor": "broken"}
    refused = [r["error"] for r in listed if r["distribution"] == "segtk-impostor"][0]
    assert "entry point 'segtk_impostor'" in refused and "dla = " in refused  # what to declare
    assert registry.attack("dla") is DLA  # still, with everything imported
    with pytest.raises(PluginError, match="attack plugin 'solo' is broken: .*entry point 'segtk_solo'"):
        registry.attack("solo")
    used = CliRunner().invoke(cli, ["attack", "--plugin", "solo"])
    assert used.exit_code == 1 and "segtk_solo" in used.output and "Traceback" not in used.output


def test_a_broken_plugin_is_named_when_used(third_party) -> None:
    with pytest.raises(PluginError, match="plugin 'segtk_broken' is broken: .*segtk_missing_dep_abc"):
        registry.attack("segtk_broken")
    make_distribution(third_party, "segtk-two-names", "segtk_two_names",
                      "from json import segtk_missing_dep_two\n", names=("first-q", "second-q"))
    reset_plugin_manager()
    with pytest.raises(PluginError, match="plugin 'second-q' is broken: .*segtk_missing_dep_two"):
        registry.editor("second-q")  # by any of its names
    from segtk.cli import cli

    used = CliRunner().invoke(cli, ["attack", "--plugin", "segtk_broken"])
    assert used.exit_code == 1 and "is broken" in used.output and "Traceback" not in used.output

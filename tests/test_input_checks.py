"""Options that would silently mean nothing: --split a reader has no use for, an --eps the
8-bit images cannot hold, a shared knob given twice through --param."""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from segtk.cli import cli
from segtk.core import DataError, SegmenterPlugin, hookimpl, load_dataset, registry
from segtk.core._plugins import get_plugin_manager, reset_plugin_manager
from segtk.testing import TinySegmenter


@pytest.fixture
def tiny_model():
    """`--model tiny` through the plugin manager (as in test_cli.py)."""
    reset_plugin_manager()
    plugin = types.SimpleNamespace(register_models=hookimpl(lambda register: register(
        SegmenterPlugin("tiny", lambda arg: TinySegmenter(), "tiny", "--model tiny"))))
    get_plugin_manager().register(plugin, name="tiny-test")
    registry.reset()
    yield "tiny"
    reset_plugin_manager()


@pytest.mark.parametrize("fmt", ["folder", "edited"])
def test_split_is_refused_by_readers_without_splits(fmt, folder_dataset) -> None:
    assert len(load_dataset(f"{fmt}:{folder_dataset}")) == 3
    with pytest.raises(DataError, match=r"unknown split 'train': .* no splits") as exc:
        load_dataset(f"{fmt}:{folder_dataset}", split="train")
    assert "drop --split" in str(exc.value.hint)


def test_split_is_refused_by_the_demo_reader() -> None:
    for spec in ("demo", "demo:fresh=2"):
        with pytest.raises(DataError, match=r"unknown split 'val'"):
            load_dataset(spec, split="val")


def test_split_error_on_the_command_line(folder_dataset) -> None:
    result = CliRunner().invoke(cli, ["predict", "--data", f"folder:{folder_dataset}", "--split", "test"])
    assert result.exit_code == 1 and "unknown split 'test'" in result.output and "hint:" in result.output


@pytest.mark.parametrize("eps,refused", [(0.4, True), (0.9, True), (1.0, False)])
def test_eps_under_one_is_refused_as_a_unit_scale_value(eps, refused, tmp_path, folder_dataset,
                                                        tiny_model) -> None:
    """An ε in (0, 1) is a [0,1]-scale value (8-bit storage would leave nothing of it): the
    CLI refuses it with the value to pass, as the Python API does, and writes nothing."""
    out = tmp_path / "a"
    result = CliRunner().invoke(cli, ["attack", "--plugin", "random", "--model", "tiny", "--data",
                                      f"folder:{folder_dataset}", "--budget", "3", "--eps", str(eps),
                                      "--out", str(out)])
    if refused:
        assert result.exit_code == 2, result.output
        assert f"--eps={eps:g} looks like a fraction of the [0,1] range" in result.output
        assert "on the 0-255 scale: pass --eps=" in result.output and not out.exists()
    else:
        assert result.exit_code == 0, result.output


@pytest.mark.parametrize("eps,step", [(0.4, 0), (0.5, 0), (0.99, 0), (1.0, 1), (2.7, 2)])
def test_quantise_keeps_only_whole_steps_of_eps(eps, step) -> None:
    """Why the warning's threshold is 1, not 0.5: the stored image is rounded into the ε-ball
    around the 8-bit clean image, so only whole 0-255 steps within ε survive."""
    from segtk.jobs.attack import quantise

    clean = np.full((1, 2, 2, 3), 100, dtype=np.uint8)
    adv = torch.from_numpy(clean).permute(0, 3, 1, 2).float().add(eps) / 255.0  # +ε everywhere
    stored = quantise(adv, clean, eps)
    assert int(stored.astype(int).max()) - 100 == step


def test_eps_under_one_is_refused_in_bench_attacks(tmp_path, folder_dataset, tiny_model) -> None:
    result = CliRunner().invoke(cli, ["bench", "attacks", "--attacks", "random", "--budgets", "2",
                                      "--repeats", "1", "--executor", "inline", "--model", "tiny",
                                      "--data", f"folder:{folder_dataset}", "--eps", "0.5",
                                      "--out", str(tmp_path / "b")])
    assert result.exit_code == 2, result.output
    assert "pass --eps=128 for 128/255" in result.output and not (tmp_path / "b").exists()


@pytest.mark.parametrize("param,option", [("budget=100", "--budget 100"), ("eps=4", "--eps 4"),
                                          ("seed=3", "--seed 3")])
def test_param_cannot_set_a_knob_that_has_its_own_option(param, option) -> None:
    result = CliRunner().invoke(cli, ["attack", "--plugin", "dla", "--budget", "20", "--param", param])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "its own option" in result.output and f"use {option}" in result.output  # never silently wins

"""Options that would silently mean nothing: --split a reader has no use for, an --eps the
8-bit images cannot hold, a shared knob given twice through --param."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from segtk.cli import cli
from segtk.core.errors import DataError
from segtk.core.specs import load_dataset


@pytest.mark.parametrize("fmt", ["folder", "edited"])
def test_split_is_refused_by_readers_without_splits(fmt, folder_dataset) -> None:
    assert len(load_dataset(f"{fmt}:{folder_dataset}")) == 3
    with pytest.raises(DataError, match=r"unknown split 'train': .* no splits") as exc:
        load_dataset(f"{fmt}:{folder_dataset}", split="train")
    assert "drop --split" in exc.value.hint


def test_split_is_refused_by_the_demo_reader() -> None:
    for spec in ("demo", "demo:fresh=2"):
        with pytest.raises(DataError, match=r"unknown split 'val'"):
            load_dataset(spec, split="val")


def test_split_error_on_the_command_line(folder_dataset) -> None:
    result = CliRunner().invoke(cli, ["predict", "--data", f"folder:{folder_dataset}", "--split", "test"])
    assert result.exit_code == 1 and "unknown split 'test'" in result.output and "hint:" in result.output

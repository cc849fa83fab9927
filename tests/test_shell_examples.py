"""Every example command segtk prints can be pasted into bash: it splits into the intended
words, and no `;` (as in `classes=a;b;c` or `mean=0.485;0.456;0.406`) is left unquoted, where
the shell would end the command."""

from __future__ import annotations

import json
import shlex

import pytest
from click.testing import CliRunner

from segtk.cli import cli
from segtk.commands.plugins import details
from segtk.core import registry


def unquoted_semicolons(line: str) -> list[str]:
    """The `;` (and other command separators) a POSIX shell would act on in `line`."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    return [token for token in lexer if token in (";", "&", "|", "&&", "||", ";;")]


def test_the_check_sees_what_bash_would_break_on() -> None:
    assert unquoted_semicolons("segtk predict --model onnx:m.onnx,classes=a;b") == [";"]
    assert unquoted_semicolons("segtk predict --model 'onnx:m.onnx,classes=a;b'") == []


def printed_examples() -> list[str]:
    lines = []
    for info in registry.plugins():
        shown = details(info)
        lines += shown.get("examples", [])
        if shown.get("example"):
            lines.append(shown["example"])
    return lines


def test_every_plugin_example_is_shell_safe() -> None:
    lines = printed_examples()
    assert any("classes=" in line for line in lines)  # the case that broke is among them
    bad = [line for line in lines if unquoted_semicolons(line)]
    assert not bad, "\n".join(bad)
    for line in lines:
        shlex.split(line)  # parses (balanced quotes)


@pytest.mark.parametrize("command", [["models", "--json"], ["datasets", "--json"]])
def test_listed_examples_are_shell_safe(command: list[str]) -> None:
    out = CliRunner().invoke(cli, command)
    assert out.exit_code == 0, out.output
    examples = [e for entry in json.loads(out.output) for e in entry.get("examples", [])]
    assert examples and not [e for e in examples if unquoted_semicolons(e)]


def test_the_models_listing_quotes_its_examples() -> None:
    out = CliRunner().invoke(cli, ["models"], env={"COLUMNS": "400"})
    assert out.exit_code == 0, out.output
    assert "'onnx:model.onnx,classes=sky;road;car" in out.output
    note = next(line for line in out.output.splitlines() if "quote the spec" in line)
    assert "--model 'torchscript:model.pt,classes=a;b;c'" in note


def test_the_class_mismatch_hint_quotes_its_spec() -> None:
    import re

    from segtk.class_names import check_compatible
    from segtk.core import DataError, Dataset
    from segtk.testing import TinySegmenter

    model = TinySegmenter()
    data = Dataset("d", [f"other{i}" for i in range(len(model.classes))], [])
    with pytest.raises(DataError) as info:
        check_compatible(model, data)
    commands = re.findall(r"--model \S+", info.value.hint or "")
    assert commands and not [c for c in commands if unquoted_semicolons(c)], info.value.hint

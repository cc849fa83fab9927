"""Each attack plugin's README states its parameters' defaults in a table; a default changed in
code but not there would send users (and anyone reproducing a documented number) off with the
wrong value, so the table is read here and held to the code."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from segtk.core import registry

ROOT = Path(__file__).resolve().parent.parent
READMES = sorted((ROOT / "plugins" / "attacks").glob("*/README.md"))
TABLE = re.compile(r"^\| parameter \| default \|.*\n\|[-| ]+\|\n((?:\|.*\n)+)", re.M)


def documented_defaults(text: str) -> dict[str, str]:
    """{key: the first `...` of its default cell} from the README's parameter table."""
    table = TABLE.search(text)
    assert table, "no '| parameter | default |' table"
    found = {}
    for row in table[1].splitlines():
        key, default = (cell.strip() for cell in row.split("|")[1:3])
        quoted = re.match(r"`([^`]*)`", default)
        found[key.strip("`")] = quoted[1] if quoted else default
    return found


def as_written(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    return repr(value)


@pytest.mark.parametrize("readme", READMES, ids=lambda p: p.parent.name)
def test_the_readme_parameter_table_states_the_code_defaults(readme: Path) -> None:
    text = readme.read_text()
    heading = re.search(r"— `([^`]+)`", text.splitlines()[0])
    assert heading, f"{readme}: the first line names no attack (— `name`)"
    name = heading[1]
    fields = {f.name: f.default for f in dataclasses.fields(registry.attack(name).Params)}
    documented = documented_defaults(text)
    assert {"eps", "budget"} <= set(documented) <= set(fields), f"{readme}: documents parameters the attack lacks"
    wrong = {key: (shown, as_written(fields[key])) for key, shown in documented.items()
             if fields[key] is not None and shown.lower() != as_written(fields[key]).lower()}
    assert not wrong, f"{readme}: (README, code) defaults differ: {wrong}"


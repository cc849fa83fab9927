"""The attack kit's door, checked from the source: `segtk.attackkit.__all__` is exactly what
attack plugins import from it, docs/write-a-plugin.md documents exactly that, and the kit sits
above the contracts (core's door holds none of its names, core never imports it)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import segtk.attackkit as attackkit
import segtk.core as core

ROOT = Path(__file__).resolve().parent.parent
KIT = "segtk.attackkit"


def imported_from_kit(path: Path) -> set[str]:
    """The names a module imports with `from segtk.attackkit import ...`."""
    return {alias.name for node in ast.walk(ast.parse(path.read_text(), str(path)))
            if isinstance(node, ast.ImportFrom) and node.module == KIT and node.level == 0
            for alias in node.names}


def test_the_door_is_what_attack_plugins_import() -> None:
    used: set[str] = set()
    for path in (ROOT / "plugins").glob("*/*/segtk_*/**/*.py"):
        used |= imported_from_kit(path)
    assert "next_flip" in used, "the scan missed DLA's import: is the layout as it thinks?"
    unused = sorted(set(attackkit.__all__) - used)
    assert not unused, f"segtk.attackkit exports {unused}, which no plugin imports: keep them private"
    assert used <= set(attackkit.__all__), sorted(used - set(attackkit.__all__))


def test_the_documented_door_is_exactly_attackkit_all() -> None:
    text = (ROOT / "docs" / "write-a-plugin.md").read_text()
    section = text.split("## The attack kit: `segtk.attackkit`", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "`" in line]
    documented = {name for row in rows for name in re.findall(r"`([A-Za-z_]+)`", row.split("|")[2])}
    assert documented == set(attackkit.__all__), (sorted(set(attackkit.__all__) - documented),
                                                  sorted(documented - set(attackkit.__all__)))


def test_the_kit_sits_above_the_contracts() -> None:
    assert not set(core.__all__) & set(attackkit.__all__), "a kit name is in segtk.core's door"
    importers = [path.name for path in (ROOT / "core").glob("*.py")
                 for node in ast.walk(ast.parse(path.read_text()))
                 if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(KIT)
                 or isinstance(node, ast.Import) and any(a.name.startswith(KIT) for a in node.names)]
    assert not importers, f"core imports the attack kit: {importers}"

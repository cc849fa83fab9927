"""The editing kit's door, checked from the source: `segtk.editkit.__all__` is exactly what
editor and augmenter plugins, segtk's own packages, its suites and its scaffold templates import
from the kit; docs/write-a-plugin.md documents exactly that; the kit sits above the contracts
(core's door holds none of its names, core never imports it)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import segtk.core as core
import segtk.editkit as editkit

ROOT = Path(__file__).resolve().parent.parent
KIT = "segtk.editkit"
# Not users of the door: the kit itself, segtk's own unit tests, developer scripts, docs, builds.
NOT_USERS = {"editkit", "tests", "bench", "docs", "build"}
TEMPLATE_IMPORT = re.compile(r"^from segtk\.editkit import (\([^)]*\)|[^\n]+)", re.MULTILINE)


def imported_from_kit(text: str, path: Path) -> set[str]:
    """The names a module imports with `from segtk.editkit import ...`."""
    if path.suffix == ".tmpl":  # a scaffold template is Python with $placeholders
        return {name.strip() for found in TEMPLATE_IMPORT.findall(text)
                for name in found.strip("()").split(",") if name.strip()}
    return {alias.name for node in ast.walk(ast.parse(text, str(path)))
            if isinstance(node, ast.ImportFrom) and node.module == KIT and node.level == 0
            for alias in node.names}


def users() -> dict[str, set[str]]:
    """kit name -> the files (plugins, segtk's packages, suites, templates) that import it."""
    found: dict[str, set[str]] = {}
    for path in sorted(ROOT.rglob("*")):
        rel = path.relative_to(ROOT)
        if path.suffix not in (".py", ".tmpl") or not path.is_file() or rel.parts[0] in NOT_USERS \
                or rel.parts[0].startswith(".") or any(p.endswith(".egg-info") for p in rel.parts):
            continue
        for name in imported_from_kit(path.read_text(), path):
            found.setdefault(name, set()).add(rel.as_posix())
    return found


def test_the_door_is_what_plugins_and_segtk_import() -> None:
    used = users()
    assert {"plugins/editors/size/segtk_editor_size/editor.py",
            "commands/scaffold_templates/editor/__package__/editor.py.tmpl"} <= \
        set().union(*used.values()), "the scan missed known users: is the layout as it thinks?"
    unused = sorted(set(editkit.__all__) - set(used))
    assert not unused, (f"segtk.editkit exports {unused}, which no plugin, segtk package, suite "
                        "or scaffold template imports: keep them private to the kit")
    assert set(used) <= set(editkit.__all__), sorted(set(used) - set(editkit.__all__))
    assert all(hasattr(editkit, name) for name in editkit.__all__)


def test_the_scan_sees_a_templates_and_a_modules_imports() -> None:
    template = "from segtk.core import X\nfrom segtk.editkit import (\n    bbox,\n    Skip,\n)\n"
    assert imported_from_kit(template, Path("t.py.tmpl")) == {"bbox", "Skip"}
    module = "import segtk.editkit\nfrom segtk.editkit import bbox as b, Scale\nfrom x import y\n"
    assert imported_from_kit(module, Path("m.py")) == {"bbox", "Scale"}


def test_the_documented_door_is_exactly_editkit_all() -> None:
    text = (ROOT / "docs" / "write-a-plugin.md").read_text()
    section = text.split("## The editing kit: `segtk.editkit`", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "`" in line]
    documented = {name for row in rows for name in re.findall(r"`([A-Za-z_]+)`", row.split("|")[2])}
    missing, extra = set(editkit.__all__) - documented, documented - set(editkit.__all__)
    assert not missing and not extra, (f"add to the editing kit's table: {sorted(missing)}; "
                                       f"documented but not exported: {sorted(extra)}")


def test_the_kit_sits_above_the_contracts() -> None:
    assert not set(core.__all__) & set(editkit.__all__), "a kit name is in segtk.core's door"
    importers = [path.name for path in (ROOT / "core").glob("*.py")
                 for node in ast.walk(ast.parse(path.read_text()))
                 if isinstance(node, ast.Import | ast.ImportFrom)
                 and any(m.startswith(KIT) for m in modules(node))]
    assert not importers, f"core imports the editing kit: {importers}"


def modules(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.ImportFrom):
        return [node.module or ""]
    return [alias.name for alias in node.names]

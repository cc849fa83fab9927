"""The plugin door holds contracts, checked from the source: `segtk.core.__all__` has at most
70 names, each imported by at least one plugin, scaffold template or contract suite. segtk's
own helpers (spec strings, device resolution, robustness summaries, plugin listing, ...) live
in core's private modules and segtk's packages import them from there."""

from __future__ import annotations

import ast
from pathlib import Path
from string import Template

import segtk.core as core

ROOT = Path(__file__).resolve().parent.parent
MOST = 70
DOOR = "segtk.core"


def parse(path: Path) -> ast.Module:
    """A module, or a scaffold template with its $placeholders filled in."""
    text = path.read_text()
    if path.suffix == ".tmpl":
        text = Template(text).safe_substitute(name="x", package="segtk_x", cls="X", module="m")
    return ast.parse(text, str(path))


def names_used(tree: ast.Module) -> set[str]:
    """The names a module takes from the door: `from segtk.core import X`, and `core.X` after
    `import segtk.core as core` or `from segtk import core`."""
    names: set[str] = set()
    aliases: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            if node.module == DOOR:
                names.update(alias.name for alias in node.names)
            elif node.module == "segtk":
                aliases.update(a.asname or a.name for a in node.names if a.name == "core")
        elif isinstance(node, ast.Import):
            aliases.update(a.asname for a in node.names if a.name == DOOR and a.asname)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in aliases:
            names.add(node.attr)
    return names


def door_users() -> dict[Path, set[str]]:
    """Each plugin module (code and tests), scaffold template and suite: the names it uses."""
    paths = [p for p in ROOT.glob("plugins/*/*/**/*.py") if "egg-info" not in p.as_posix()]
    paths += sorted((ROOT / "commands" / "scaffold_templates").rglob("*.py.tmpl"))
    paths += sorted((ROOT / "testing").glob("*_suite.py"))
    return {path: names_used(parse(path)) for path in paths}


def test_every_name_in_the_door_is_used_by_a_plugin_template_or_suite() -> None:
    users = door_users()
    used = set().union(*users.values())
    assert {"Attack", "Segmenter", "hookimpl", "Register"} <= used, \
        "the scan found too little: is the layout as this test thinks?"
    unused = sorted(set(core.__all__) - used)
    assert not unused, (f"segtk.core exports {unused}, which no plugin, scaffold template or "
                        "suite imports: segtk's own packages import them from core's private "
                        "module (from segtk.core._MODULE import NAME)")


def test_the_door_has_at_most_70_names() -> None:
    assert len(core.__all__) <= MOST, f"segtk.core exports {len(core.__all__)} names"
    assert len(set(core.__all__)) == len(core.__all__)
    assert all(hasattr(core, name) for name in core.__all__)


def test_plugins_templates_and_suites_use_only_the_door() -> None:
    """What they take from segtk.core is in its __all__ (a name that left the door is imported
    from nowhere a plugin may reach)."""
    bad = [f"{path.relative_to(ROOT)}: {sorted(names - set(core.__all__))}"
           for path, names in door_users().items()
           if names - set(core.__all__) - {"_attack"}]  # the attack suite patches Attack.run's counter
    assert not bad, "not in segtk.core's door:\n" + "\n".join(bad)


def test_the_scan_reads_imports_attributes_and_templates(tmp_path: Path) -> None:
    module = ("import segtk.core as c\nfrom segtk import core\nfrom segtk.core import A, B as b\n"
              "c.C\ncore.D\nother.E\n")
    assert names_used(ast.parse(module)) == {"A", "B", "C", "D"}
    template = tmp_path / "t.py.tmpl"
    template.write_text("from segtk.core import F\nclass ${cls}Thing(F): name = '$name'\n")
    assert names_used(parse(template)) == {"F"}

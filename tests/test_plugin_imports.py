"""No plugin imports another plugin: what plugins of one kind share lives in a segtk kit
(`segtk.attackkit`, `segtk.editkit`), so each distribution installs, breaks and upgrades alone.
Checked from the source of every plugin package (not its tests)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def own_packages(dist: Path) -> set[str]:
    """The top-level `segtk_*` packages a plugin distribution ships (its folders)."""
    return {p.name for p in dist.glob("segtk_*") if (p / "__init__.py").exists()}


def imported(path: Path) -> list[tuple[str, int]]:
    """(top-level module, line) of every absolute import in one file, in functions too."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name.split(".")[0], node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module.split(".")[0], node.lineno))
    return found


def foreign_imports(plugins: Path) -> list[str]:
    """`path:line imports segtk_x` for each import of another distribution's package."""
    bad = []
    for dist in sorted(p for p in plugins.glob("*/*") if (p / "pyproject.toml").exists()):
        own = own_packages(dist)
        for package in sorted(own):
            for path in sorted((dist / package).rglob("*.py")):
                for module, line in imported(path):
                    if module.startswith("segtk_") and module not in own:
                        bad.append(f"{path.relative_to(plugins.parent)}:{line} imports {module}")
    return bad


def test_no_plugin_imports_another_plugin() -> None:
    assert len(list((ROOT / "plugins").glob("*/*/pyproject.toml"))) > 30, \
        "the scan found too few plugins: is the layout as this test thinks?"
    bad = foreign_imports(ROOT / "plugins")
    assert not bad, ("a plugin imports another plugin; move what they share into a kit "
                     "(segtk.attackkit, segtk.editkit):\n" + "\n".join(bad))


def test_the_scan_finds_an_import_of_another_plugin(tmp_path: Path) -> None:
    for name, source in (("a", "import torch\nfrom segtk_a.x import y\n"),
                         ("b", "def f():\n    from segtk_a.attack import HORIZONTAL\n")):
        package = tmp_path / "plugins" / "attacks" / name / f"segtk_{name}"
        package.mkdir(parents=True)
        (package.parent / "pyproject.toml").write_text("")
        (package / "__init__.py").write_text(source)
    assert foreign_imports(tmp_path / "plugins") == [
        "plugins/attacks/b/segtk_b/__init__.py:2 imports segtk_a"]

"""The architecture, checked from the source: no import cycles, plugins build only on the API
(`segtk.core`, `segtk.editkit`, `segtk.attackkit`,
`segtk.testing`), and no imports hidden inside functions except
of optional heavy libraries (which a plugin must be able to miss: `segtk plugins` then reports
it)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ["api", "core", "editkit", "attackkit", "storage", "jobs", "benchmarks", "reports", "datasets",
            "commands", "testing", "imaging", "class_names"]
API = ("segtk.core", "segtk.editkit", "segtk.attackkit", "segtk.testing")
# Optional stacks a module may import inside the function that needs them.
OPTIONAL = {
    "albumentations", "cv2", "detectron2", "diffusers", "huggingface_hub", "kornia", "matplotlib",
    "mmcv", "mmengine", "mmseg", "onnx", "onnxruntime", "onnxscript", "pandas", "ray", "starlette",
    "transformers", "uvicorn",
}  # fmt: skip
# The pytest plugin loads in every pytest run wherever segtk is installed: its fixtures import
# segtk.testing's modules (and with them torch) only when a test asks for one.
# What may be imported inside a function, by module: the pytest plugin defers the kit, and the CLI
# imports segtk itself only when a command runs (so `segtk --help` imports neither torch nor plugins).
LAZY = {"segtk.testing.pytest_plugin": "segtk.testing", "segtk.cli": "segtk."}


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT)
    if rel.parts[0] == "plugins":
        package = next(i for i, part in enumerate(rel.parts) if part.startswith("segtk_"))
        parts = list(rel.parts[package:])
    else:
        parts = ["segtk", *rel.parts]
    parts[-1] = parts[-1].removesuffix(".py")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def sources() -> dict[str, Path]:
    """Every module of the segtk package and of the plugin packages (not their tests)."""
    paths = [ROOT / "cli.py", ROOT / "__init__.py"]
    paths += [ROOT / f"{name}.py" for name in PACKAGES if (ROOT / f"{name}.py").exists()]
    paths += [p for name in PACKAGES for p in (ROOT / name).rglob("*.py")]
    paths += [p for p in (ROOT / "plugins").glob("*/*/segtk_*/**/*.py")]
    return {module_name(p): p for p in paths if "scaffold_templates" not in p.parts}


def imports(path: Path, modules: set[str] | frozenset[str] = frozenset(),
            runtime_only: bool = False) -> Iterator[tuple[str, bool, int]]:
    """(imported module, inside a function?, line) for each import. `from a import b` yields
    a.b where that is one of `modules` (importing a submodule, not what package a defines),
    else a and a.b. `runtime_only` leaves out imports under `if TYPE_CHECKING:` (for types only:
    they never run, so they make no cycle)."""
    tree = ast.parse(path.read_text(), str(path))
    in_function: set[int] = set()
    type_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            in_function.update(id(n) for n in ast.walk(node) if n is not node)
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and \
                node.test.id == "TYPE_CHECKING":
            type_only.update(id(n) for child in node.body for n in ast.walk(child))
    for node in ast.walk(tree):
        if runtime_only and id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, id(node) in in_function, node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            inside = id(node) in in_function
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            if not all(name in modules for name in names):
                yield node.module, inside, node.lineno
            for name in names:
                yield name, inside, node.lineno


def graph() -> dict[str, set[str]]:
    mods = sources()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        for target, _, _ in imports(path, set(mods), runtime_only=True):
            if target in mods and target != name:
                edges[name].add(target)
    return edges


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_cycle_finder_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycles() -> None:
    edges = graph()
    assert len(edges) > 60, "the scan found too few modules: is the layout as this test thinks?"
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_plugins_import_only_the_api() -> None:
    bad = []
    for name, path in sources().items():
        if not name.startswith("segtk_"):
            continue
        for target, _, line in imports(path):
            private = target.startswith(("segtk.core._", "segtk.editkit._"))
            if target.split(".")[0] == "segtk" and (private or not target.startswith(API)) and target != "segtk":
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not bad, "plugins may import only segtk.core, the kits and segtk.testing:\n" + \
        "\n".join(bad)


def test_no_function_level_imports_but_optional_stacks() -> None:
    bad = []
    for name, path in sources().items():
        top = name.split(".")[0]
        for target, inside, line in imports(path):
            if not inside:
                continue
            first = target.split(".")[0]
            # A plugin may defer its own modules: they are what imports its optional stack.
            if first in OPTIONAL or (top.startswith("segtk_") and first == top):
                continue
            if name in LAZY and target.startswith(LAZY[name]):
                continue
            bad.append(f"{path.relative_to(ROOT)}:{line} imports {target} inside a function")
    assert not bad, "\n".join(sorted(set(bad)))


def test_core_exports_its_api() -> None:
    import segtk.core as core

    assert (ROOT / "core" / "py.typed").exists()
    assert core.__all__ and all(hasattr(core, name) for name in core.__all__)
    for contract in ("Attack", "Segmenter", "Editor", "Filter", "QueryCounter", "Proxy"):
        assert contract in core.__all__


def test_plugins_templates_and_docs_never_name_core_private_modules() -> None:
    """One door for plugins: plugin code, scaffold templates and the docs import
    `from segtk.core import ...`, never a private module. segtk's own packages (api, jobs,
    commands, the kits, ...) import the helpers that are not plugin contracts (spec strings,
    device resolution, summaries) from core's private modules, where they live."""
    private = re.compile(r"segtk\.core\._[a-z]")
    paths = [p for p in ROOT.rglob("*") if p.suffix in (".py", ".tmpl", ".md") and p.is_file()]
    bad = []
    for path in paths:
        rel = path.relative_to(ROOT)
        public = rel.parts[0] in ("plugins", "docs") or rel.as_posix() == "README.md" \
            or "scaffold_templates" in rel.parts
        if not public or rel.as_posix() == "docs/reliability.md" or "egg-info" in rel.as_posix():
            continue  # reliability.md names the files mutation testing mutates
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if private.search(line):
                bad.append(f"{rel}:{number}: {line.strip()}")
    assert not bad, "import from segtk.core, not its private modules:\n" + "\n".join(bad)


def test_core_modules_are_private() -> None:
    public = [p.name for p in (ROOT / "core").glob("*.py") if not p.name.startswith("_")]
    assert public == [], f"core's modules are private (core/_NAME.py): {public}"


def test_the_documented_api_is_exactly_core_all() -> None:
    """docs/write-a-plugin.md lists every name segtk.core exports, and nothing else."""
    import segtk.core as core

    text = (ROOT / "docs" / "write-a-plugin.md").read_text()
    section = text.split("### Everything `segtk.core` exports", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "`" in line]
    documented = {name for row in rows for name in re.findall(r"`([A-Za-z_]+)`", row.split("|")[2])}
    missing, extra = set(core.__all__) - documented, documented - set(core.__all__)
    assert not missing and not extra, (
        f"add to docs/write-a-plugin.md's API table: {sorted(missing)}; "
        f"documented but not exported: {sorted(extra)}")

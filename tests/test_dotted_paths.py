"""Every dotted segtk path the docs (README, docs/, the plugins' READMEs), the docstrings and
the comments name resolves: `segtk.core.Segmenter`, `jobs.attack.quantise` (a path inside segtk
written without its `segtk.`), `segtk.testing.AttackSuite` import and have that attribute; and
every file of segtk they name (`core/_png.py`) exists. So a module renamed or a name moved
leaves no stale reference behind."""

from __future__ import annotations

import ast
import importlib
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
# segtk's subpackages, as a docstring names them without `segtk.` (their folders; `cli.py` and
# the other root modules are named with `segtk.` or as files).
SUBPACKAGES = sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file())
NAMES = "|".join(SUBPACKAGES)
FILE = re.compile(rf"(?<![\w./-])((?:{NAMES})(?:/[\w.-]+)+\.pyi?)\b")
PATH = re.compile(rf"(?<![\w./-])((?:segtk|{NAMES})(?:\.[A-Za-z_]\w*)+)")
# File names (`cli.py`, `segtk.json`), not module paths.
SUFFIXES = {"py", "pyi", "md", "json", "jsonl", "toml", "txt", "html", "j2", "csv", "png", "yaml"}
# Placeholders in prose: segtk.NAME, segtk.core.X are any name.
PLACEHOLDERS = {"NAME", "X"}
# Folders of the source tree that are not segtk packages: named to say they do not import
# (tests/test_packaging.py checks that they are refused).
NOT_SEGTK = {p.name for p in ROOT.iterdir() if p.is_dir() and not (p / "__init__.py").exists()}
SKIP = {".git", "build", "__pycache__", "node_modules"}


def documents() -> Iterator[Path]:
    yield from sorted(ROOT.glob("*.md"))
    yield from sorted(ROOT.glob("docs/*.md"))
    yield from sorted(ROOT.glob("plugins/*/*/README.md"))


def sources() -> Iterator[Path]:
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT).parts
        if not SKIP.intersection(parts) and not any(p.startswith(".") or p.endswith(".egg-info")
                                                    for p in parts):
            yield path


def docstrings(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            text = ast.get_docstring(node, clean=False)
            if text:
                yield text


def comments(path: Path) -> Iterator[str]:
    for token in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if token.type == tokenize.COMMENT:
            yield token.string


def named_paths(text: str) -> Iterator[str]:
    """The dotted segtk paths `text` names, each with its `segtk.`."""
    for match in PATH.finditer(text):
        path = match.group(1)
        if path.rsplit(".", 1)[1] in SUFFIXES or PLACEHOLDERS.intersection(path.split(".")):
            continue
        path = path if path.startswith("segtk.") else f"segtk.{path}"
        if path.split(".")[1] not in NOT_SEGTK:
            yield path


def resolve(path: str) -> Any:
    """The object `path` names: each part an attribute of the one before, or its submodule."""
    parts = path.split(".")
    obj: Any = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], start=2):
        if hasattr(obj, part):
            obj = getattr(obj, part)
            continue
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError as exc:
            if exc.name != ".".join(parts[:i]):
                raise
            raise AttributeError(f"{'.'.join(parts[:i - 1])} has no {part!r}") from None
    return obj


def stale(paths: dict[str, set[str]]) -> list[str]:
    bad = []
    for path, where in sorted(paths.items()):
        try:
            resolve(path)
        except (ImportError, AttributeError) as exc:
            bad.append(f"{path} ({', '.join(sorted(where))}): {exc}")
    return bad


def collect(texts: Iterator[tuple[Path, str]]) -> dict[str, set[str]]:
    paths: dict[str, set[str]] = {}
    for file, text in texts:
        for path in named_paths(text):
            paths.setdefault(path, set()).add(str(file.relative_to(ROOT)))
    return paths


def test_the_finder_reads_both_spellings() -> None:
    text = "`segtk.core.Segmenter`, core.runs.RunDir, cli.py, segtk.json, `segtk.core.X`"
    assert list(named_paths(text)) == ["segtk.core.Segmenter", "segtk.core.runs.RunDir"]
    assert stale({"segtk.core.runs.RunDir": {"x"}}) != []
    assert stale({"segtk.core.Segmenter": {"x"}, "segtk.jobs.attack.quantise": {"x"}}) == []


def test_paths_in_the_docs_resolve() -> None:
    paths = collect((f, f.read_text()) for f in documents())
    assert "segtk.core.Segmenter" in paths
    bad = stale(paths)
    assert not bad, "the docs name paths that do not exist:\n" + "\n".join(bad)


def in_group(path: Path, group: str) -> bool:
    top = path.relative_to(ROOT).parts[0]
    return top == group if group != "segtk" else top not in {"plugins", "tests"}


@pytest.mark.parametrize("group", ["segtk", "plugins", "tests"])
def test_paths_in_docstrings_and_comments_resolve(group: str) -> None:
    """Docstrings and comments of segtk's modules, of the plugins and of the tests."""
    paths = collect((f, text) for f in sources() if in_group(f, group)
                    for text in [*docstrings(f), *comments(f)])
    bad = stale(paths)
    assert not bad, "docstrings and comments name paths that do not exist:\n" + "\n".join(bad)


def test_files_named_exist() -> None:
    """Module files of segtk named in the docs and in segtk's and the plugins' sources (the
    tests name missing ones on purpose)."""
    files = [*documents(), *(f for f in sources() if not in_group(f, "tests"))]
    bad = sorted({f"{m.group(1)} ({f.relative_to(ROOT)})" for f in files
                  for m in FILE.finditer(f.read_text()) if not (ROOT / m.group(1)).is_file()})
    assert not bad, "files named that do not exist:\n" + "\n".join(bad)

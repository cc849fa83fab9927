"""Only segtk's own packages import as `segtk.*`.

The repository root is package `segtk` (pyproject's package-dir), so in an editable install
every folder beside `core/` would import as a namespace package: `segtk.tests`, `segtk.bench`,
`segtk.plugins.attacks.dla.segtk_dla` (a second copy of a plugin, with its own classes). A built
wheel holds only the packages pyproject lists, each a regular package (with `__init__.py`).
The finder below makes an editable install behave like the wheel: a `segtk.*` name that would
import as a namespace package is refused. It is consulted first but only decides for names under
`segtk.` (the root's own folders); everything else, and every regular module or package, is
left to the usual finders.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec, PathFinder
from types import ModuleType


class SubpackagesOnly:
    """A meta-path finder that refuses `segtk.*` namespace packages (folders without
    `__init__.py`: tests, docs, bench, plugins, ...); it finds nothing itself."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if not fullname.startswith("segtk.") or fullname.count(".") != 1 or path is None:
            return None
        spec = PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is None and spec.submodule_search_locations:
            folder = list(spec.submodule_search_locations)[0]
            raise ModuleNotFoundError(
                f"No module named {fullname!r}: folder {folder} is in segtk's source tree but "
                f"not part of package segtk (its packages are listed in pyproject.toml; a plugin "
                f"imports as its own package, segtk_<name>)",
                name=fullname)
        return None


def install() -> None:
    """Put the finder first on `sys.meta_path`, once per process."""
    if not any(isinstance(finder, SubpackagesOnly) for finder in sys.meta_path):
        sys.meta_path.insert(0, SubpackagesOnly())

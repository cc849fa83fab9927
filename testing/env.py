"""Where the real models and data live, and skips that say what is missing.

Tests that need `../shared` (real weights, CamVid) or an optional stack (mmcv, detectron2)
skip with a reason naming it; CI sets SEGTK_REQUIRE_SHARED=1 (or the stack's flag) so the
same absence fails instead of hiding behind a skip.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from segtk.core import missing_modules

# The repository's sibling `shared/` folder (override with SEGTK_SHARED).
SHARED = Path(os.environ.get("SEGTK_SHARED", Path(__file__).resolve().parents[2] / "shared"))


def shared(relative: str) -> Path:
    """A path under ../shared; skips the test where it is absent, fails if CI requires it."""
    path = SHARED / relative
    if path.exists():
        return path
    reason = f"{path} is absent (real models/data live in ../shared next to the repo)"
    if os.environ.get("SEGTK_REQUIRE_SHARED") == "1":
        pytest.fail(f"SEGTK_REQUIRE_SHARED=1 but {reason}")
    pytest.skip(reason)


def requires_stack(modules: tuple[str, ...], flag: str, how: str = "") -> pytest.MarkDecorator:
    """Skip where an optional stack (mmcv, detectron2, ...) is not importable, naming what is
    missing; where the environment variable `flag` is "1" (CI, after its install script ran),
    run anyway so the missing import fails the test instead of hiding behind a skip."""
    missing = missing_modules(modules)
    required = os.environ.get(flag) == "1"
    return pytest.mark.skipif(
        bool(missing) and not required,
        reason=f"needs {', '.join(missing)} ({how + '; ' if how else ''}"
               f"set {flag}=1 to make this a failure)",
    )

"""mypy over the plugin API (segtk.core) and the CLI entry point: the contracts plugins build
on are typed (py.typed ships with them), and stay clean."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_mypy_is_clean_on_core_and_cli(tmp_path: Path) -> None:
    pytest.importorskip("mypy", reason="mypy comes with the test extras: pip install -e .[test]")
    # The repository root *is* package `segtk` (pyproject's package-dir); mypy finds it by name
    # through a folder whose `segtk` entry points at the root.
    (tmp_path / "path").mkdir()
    (tmp_path / "path" / "segtk").symlink_to(ROOT)
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "segtk" / "mypy"
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(cache), "-p", "segtk.core", "-m", "segtk.cli"],
        cwd=tmp_path / "path", env={**os.environ, "MYPYPATH": str(tmp_path / "path")},
        capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr

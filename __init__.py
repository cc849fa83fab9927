"""segtk: stress-test semantic segmentation models before they ship.

The Python API (`segtk.attack`, `segtk.attack_tensors`, `segtk.bench_attacks`, `segtk.edit`,
`segtk.bench_edits`, `segtk.train`, `segtk.bench_augment`, `segtk.bench_seeds`,
`segtk.load_model`, `segtk.wrap`, `segtk.load_dataset`) lives in `segtk.api` and is imported on first use, so `import segtk`
stays light (no torch).
"""

from __future__ import annotations

import importlib
from typing import Any

from segtk import _import_guard

_import_guard.install()  # folders of the source tree that are not segtk packages do not import

__version__ = "0.1.0"

API = ("AttackRun", "Table", "attack", "attack_tensors", "bench_attacks", "bench_augment",
       "bench_edits", "bench_seeds", "edit", "load_dataset", "load_model", "predict", "report",
       "train", "wrap")
ELSEWHERE = {"evaluate": "segtk.evaluation"}  # imported on first use from its own package
__all__ = [*API, *ELSEWHERE, "__version__"]


def __getattr__(name: str) -> Any:
    """`segtk.attack` and the rest of the API, imported when first used (PEP 562)."""
    if name in API or name in ELSEWHERE:
        return getattr(importlib.import_module(ELSEWHERE.get(name, "segtk.api")), name)
    raise AttributeError(f"module 'segtk' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *API, *ELSEWHERE])

"""segtk's pytest plugin, loaded wherever segtk is installed (entry point `pytest11`, name
"segtk"): fixtures for plugin tests and the markers segtk's suites use.

It is loaded by every pytest run in an environment with segtk, most of which never use it: so
it imports nothing heavy at start-up (no torch, no hypothesis, not segtk.core). Each fixture
imports what it gives when a test first asks for it.

Disable it for one run with `pytest -p no:segtk`. Do not also list it in `pytest_plugins`: it is
already registered, and pytest refuses a plugin registered twice.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import torch

    from segtk.core import Dataset, Sample
    from segtk.testing.fakes import TinySegmenter

MARKERS = (
    "shared: needs the real models and data in ../shared (skips where absent; "
    "SEGTK_REQUIRE_SHARED=1 makes that a failure)",
    "slow: takes more than a few seconds",
)


def pytest_configure(config: pytest.Config) -> None:
    for line in MARKERS:
        config.addinivalue_line("markers", line)


@pytest.fixture
def tiny_segmenter() -> TinySegmenter:
    """A fresh TinySegmenter: 4 classes, fixed random 3x3 conv, logits, batch-invariant."""
    from segtk.testing import fakes

    return fakes.TinySegmenter()


@pytest.fixture
def toy_batch() -> tuple[torch.Tensor, torch.Tensor]:
    """(images [2,3,17,23] in [0,1], labels [2,17,23]): the tiny model's clean predictions."""
    from segtk.testing import fakes

    return fakes.toy_batch()


@pytest.fixture
def toy_sample() -> Sample:
    """An editing Sample: a car (the mask) on a road, 48x64, classes TOY_CLASSES."""
    from segtk.testing import fakes

    return fakes.toy_sample()


@pytest.fixture
def toy_dataset() -> Dataset:
    """Three toy scenes as a Dataset (for filters that `prepare` on the sources)."""
    from segtk.testing import fakes

    return fakes.toy_dataset()


@pytest.fixture
def shared_path() -> Callable[[str], Path]:
    """`shared_path("models/x.safetensors")`: the path under ../shared, or a skip naming it
    (a failure where SEGTK_REQUIRE_SHARED=1)."""
    from segtk.testing import env

    return env.shared

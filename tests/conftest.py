"""Shared fixtures: a small on-disk folder dataset labelled by the tiny model."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from segtk.core import save_safetensors
from segtk.core._data import to_tensor, to_uint8, write_png
from segtk.storage import layout
from segtk.testing import TinySegmenter, toy_batch


def write_folder_dataset(root: Path, n: int = 3, height: int = 13, width: int = 17) -> Path:
    images, _ = toy_batch(n, height, width, seed=1)
    u8 = to_uint8(images)
    labels = TinySegmenter().predict(to_tensor(list(u8))).numpy()  # what the model sees
    labels[:, 0, 0] = 255  # one ignore pixel per image
    for i in range(n):
        write_png(root / "images" / f"img{i}.png", u8[i])
        write_png(root / "labels" / f"img{i}.png", labels[i].astype(np.uint8))
    (root / "classes.txt").write_text("\n".join(TinySegmenter().classes) + "\n")
    return root


@pytest.fixture
def folder_dataset(tmp_path: Path) -> Path:
    return write_folder_dataset(tmp_path / "data")


def run_is_locked(path: Path) -> bool:
    """Whether anyone holds a run's lock (a new open file description conflicts with any)."""
    fd = os.open(path / layout.LOCK, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


@pytest.fixture
def locked() -> Callable[[Path], bool]:
    return run_is_locked


@pytest.fixture(scope="session")
def random_demo(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A randomly initialised demo network: training from scratch shows a clear loss drop."""
    from segtk_demo.model import DemoNet

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("weights") / "random.safetensors"
    save_safetensors(path, DemoNet().state_dict())
    return f"demo:{path}"


@pytest.fixture
def refusal() -> Callable[[Callable[[], object]], tuple[str, str | None]]:
    """`refusal(call)`: the message and hint of the SegtkError `call` raises (it must raise)."""
    from segtk.core import SegtkError

    def refused(call: Callable[[], object]) -> tuple[str, str | None]:
        with pytest.raises(SegtkError) as info:
            call()
        return info.value.message, info.value.hint

    return refused

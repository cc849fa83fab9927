"""The image `segtk attack` stores is the attack's float result rounded to the nearest 8-bit
step, then cut to the ε-ball around the 8-bit clean image and to [0,255]: checked on the job
itself against values worked out by hand (not against segtk's own quantise)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import torch

from segtk.core import Attack, AttackParams, Dataset, Item, Oracle, project, read_image
from segtk.jobs.attack import attack_dataset
from segtk.storage.runs import RunDir
from segtk.testing import TinySegmenter

# Offsets in 8-bit steps the attack adds to the clean image, and what must be stored (ε = 8):
# nearest step, never past ±8 (8.9 and -8.6 are cut by the oracle's projection first).
OFFSETS = [-8.6, -7.6, -0.6, -0.45, 0.45, 0.55, 0.6, 1.4, 1.6, 7.6, 8.9, 0.0]
STORED = [-8, -8, -1, 0, 0, 1, 1, 1, 2, 8, 8, 0]


class Offsets(Attack[AttackParams]):
    """Queries the clean image plus OFFSETS (one per column, every row and channel) once."""

    name = "offsets"
    Params = AttackParams
    anytime: ClassVar[bool] = False

    def attack(self, oracle: Oracle) -> None:
        step = torch.tensor(OFFSETS, dtype=oracle.clean.dtype) / 255
        candidates = project(oracle.clean + step, oracle.clean, oracle.eps_unit)
        oracle.query(candidates, torch.arange(oracle.batch_size))


def test_the_stored_png_is_the_rounded_result_cut_to_the_ball_and_box(tmp_path) -> None:
    h, w = 3, len(OFFSETS)
    clean = np.full((h, w, 3), 100, dtype=np.uint8)
    clean[0] = 3  # near black: the box cuts -8 to -3 and -1 stays -1
    clean[1] = 250  # near white: +8 becomes +5, +2 stays +2
    label = np.zeros((h, w), dtype=np.int64)
    data = Dataset("rows", [f"class{i}" for i in range(4)], [("img", lambda: Item("img", clean, label))])
    run = RunDir(tmp_path / "run", {"budget": 1}, False, kind="attack")
    attack_dataset(Offsets(budget=1, eps=8.0), TinySegmenter(), data, run, batch_size=1)
    stored = read_image(tmp_path / "run" / "images" / "img.png").astype(int)
    expected = np.clip(clean.astype(int) + np.array(STORED)[None, :, None], 0, 255)
    assert np.array_equal(stored, expected), (stored[..., 0] - clean[..., 0].astype(int)).tolist()

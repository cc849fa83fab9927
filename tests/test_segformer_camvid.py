"""The committed SegFormer trained from scratch loads with `hf:` and scores what its card says."""

from __future__ import annotations

from pathlib import Path

import pytest

from segtk.core import load_dataset, load_segmenter
from segtk.jobs.predict import predict_dataset
from segtk.testing import shared

pytest.importorskip("transformers", reason="the hf plugin's stack (pip install -r extras/hf.txt)")
MODEL = Path(__file__).resolve().parents[1] / "models" / "segformer-camvid"


def test_the_committed_segformer_scores_its_card_on_camvid_val() -> None:
    model = load_segmenter(f"hf:{MODEL}")
    data = load_dataset(f"camvid:{shared('data/camvid')}", "val", 10)
    assert model.classes == data.classes
    summary = predict_dataset(model, data, None, 4, lambda n: None)
    assert summary["miou"] > 0.40, summary  # 51.2% on all 101 val images (its README)

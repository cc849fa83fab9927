"""The models trained here and committed under models/ load with `hf:` and score what their
cards say (on the first 10 CamVid val images, a floor well under the card's 101-image number)."""

from __future__ import annotations

from pathlib import Path

import pytest

from segtk.core import load_dataset, load_segmenter
from segtk.jobs.predict import predict_dataset
from segtk.testing import shared

pytest.importorskip("transformers", reason="the hf plugin's stack (pip install -r extras/hf.txt)")
MODELS = Path(__file__).resolve().parents[1] / "models"

# folder -> floor of the dataset mIoU on the first 10 val images (its README: all 101 images)
FLOORS = {
    "segformer-camvid": 0.40,  # 51.18% on all 101 val images
    "deeplabv3-camvid": 0.50,  # 60.22% on all 101 val images, 59.90% on these 10
}


@pytest.mark.parametrize("name", sorted(FLOORS))
def test_a_committed_model_scores_its_card_on_camvid_val(name: str) -> None:
    model = load_segmenter(f"hf:{MODELS / name}")
    data = load_dataset(f"camvid:{shared('data/camvid')}", "val", 10)
    assert model.classes == data.classes
    summary = predict_dataset(model, data, None, 4, lambda n: None)
    assert summary["miou"] > FLOORS[name], summary

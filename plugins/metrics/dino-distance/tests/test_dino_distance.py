"""DINO distance with a tiny random DINOv2 saved offline: the arithmetic on hand-made tokens,
the keys really taken from the last layer, the distance's properties, the contract suite."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from segtk.core import PluginError, build
from segtk.testing import MetricSuite, tiny_dinov2
from segtk.testing.metric_suite import toy_pairs
from segtk_metric_dino_distance import (
    DinoDistance,
    cls_distance,
    self_similarity,
    structure_distance,
)


@pytest.fixture(scope="module")
def dino_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_dinov2(tmp_path_factory.mktemp("dino"))


def test_arithmetic_on_hand_made_tokens() -> None:
    a = np.array([[1.0, 0.0], [0.0, 2.0]])
    assert np.allclose(self_similarity(a), np.eye(2))
    b = np.array([[1.0, 0.0], [3.0, 0.0]])  # both tokens along x: similarity 1 everywhere
    assert structure_distance(a, b) == pytest.approx(0.5)  # two off-diagonal cells of 1, of 4
    assert structure_distance(a, 5 * a) == 0.0  # scale does not matter
    assert cls_distance(np.array([1.0, 0.0]), np.array([0.0, 1.0])) == pytest.approx(1.0)
    assert cls_distance(np.array([1.0, 1.0]), np.array([2.0, 2.0])) == pytest.approx(0.0)


def test_structure_uses_the_last_layers_keys(dino_dir: Path) -> None:
    import torch

    metric = DinoDistance({"model": str(dino_dir)})
    pair = toy_pairs("noise", n=1)[0]
    tokens = metric.features([pair.original])
    inputs = metric.processor(images=[pair.original], return_tensors="pt")
    with torch.no_grad():
        hidden = metric.model(**inputs, output_hidden_states=True).hidden_states
        layer = metric.model.encoder.layer[-1]
        keys = layer.attention.attention.key(layer.norm1(hidden[-2]))
    assert tokens.shape == (1, 17, 16)  # CLS + 16 patches of a 32-pixel image, 16 wide
    assert np.allclose(tokens[0], keys[0].double().numpy(), atol=1e-6)
    cls = DinoDistance({"model": str(dino_dir), "feature": "cls"}).features([pair.original])
    with torch.no_grad():
        last = metric.model(**inputs).last_hidden_state
    assert np.allclose(cls[0], last[0, 0].double().numpy(), atol=1e-6)  # CLS: the first token


@pytest.mark.parametrize("feature", ["structure", "cls"])
def test_distance_properties(dino_dir: Path, feature: str) -> None:
    metric = build("metric", "dino-distance", {"model": str(dino_dir), "feature": feature})
    same = metric.measure(toy_pairs("unchanged"))
    assert same.per_image == pytest.approx([0.0, 0.0, 0.0], abs=1e-12)
    noise = metric.measure(toy_pairs("noise"))
    assert all(x > 0 for x in noise.per_image or [])
    swapped = toy_pairs("noise")
    for p in swapped:
        p.original, p.edited = p.edited, p.original
    assert metric.measure(swapped).per_image == pytest.approx(noise.per_image)  # symmetric


def test_a_missing_model_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PluginError, match="needs a ViT/DINOv2 model"):
        DinoDistance()
    with pytest.raises(PluginError, match="dino-distance.model="):
        DinoDistance({"model": str(tmp_path)})


class TestDinoStructureContract(MetricSuite):
    metric_cls = DinoDistance

    @pytest.fixture(autouse=True)
    def _model(self, dino_dir: Path) -> None:
        self.params = {"model": str(dino_dir)}


class TestDinoClsContract(MetricSuite):
    metric_cls = DinoDistance

    @pytest.fixture(autouse=True)
    def _model(self, dino_dir: Path) -> None:
        self.params = {"model": str(dino_dir), "feature": "cls"}

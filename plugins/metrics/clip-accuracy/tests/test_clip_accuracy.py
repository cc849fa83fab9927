"""CLIP accuracy: the decision on hand-made embeddings, and the full path with a tiny random
CLIP saved offline and loaded through segtk's loader; the metric contract suite."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from segtk.core import PluginError, QualityPair, build
from segtk.testing import MetricSuite, tiny_clip
from segtk.testing.metric_suite import toy_pairs
from segtk_metric_clip_accuracy import ClipAccuracy, closer_to_target


@pytest.fixture(scope="module")
def clip_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_clip(tmp_path_factory.mktemp("clip"))


def test_closer_to_target_on_hand_made_embeddings() -> None:
    image = np.array([1.0, 1.0, 0.0])
    assert closer_to_target(image, np.array([0.0, 0.0, 1.0]), np.array([2.0, 0.0, 0.0]))
    assert not closer_to_target(image, np.array([2.0, 0.0, 0.0]), np.array([0.0, 0.0, 1.0]))
    assert not closer_to_target(image, np.array([1.0, 0.0, 0.0]), np.array([3.0, 0.0, 0.0]))  # tie


def test_scores_are_the_decision_on_the_models_embeddings(clip_dir: Path) -> None:
    metric = build("metric", "clip-accuracy", {"model": str(clip_dir), "batch": "2"})
    pairs = toy_pairs("noise", n=5)
    pairs[1].target_text, pairs[3].source_text = "a photo of a road", "a picture of the sky"
    result = metric.measure(pairs)
    expected = []
    for p in pairs:
        img, txt = metric.embed([p.edited], [p.source_text, p.target_text])
        expected.append(float(closer_to_target(img[0], txt[0], txt[1])))
    assert result.per_image == expected
    assert 0.0 <= result.value <= 1.0 and result.value == pytest.approx(np.mean(expected))
    # swapping caption and prompt flips every decision that was no tie
    swapped = [QualityPair(p.original, p.edited, p.mask, p.target_text, p.source_text)
               for p in pairs]
    flipped = metric.measure(swapped).per_image
    assert flipped == [1.0 - x for x in expected]


def test_a_pair_without_texts_and_a_missing_model_are_refused(clip_dir: Path, tmp_path: Path) -> None:
    metric = ClipAccuracy({"model": str(clip_dir)})
    pair = toy_pairs("unchanged", n=1)[0]
    pair.target_text = ""
    with pytest.raises(PluginError, match="lacks its caption or its edit prompt"):
        metric.measure([pair])
    with pytest.raises(PluginError, match="needs a CLIP model"):
        ClipAccuracy()
    with pytest.raises(PluginError, match="clip-accuracy.model="):
        ClipAccuracy({"model": str(tmp_path / "nope")})


class TestClipAccuracyContract(MetricSuite):
    metric_cls = ClipAccuracy

    @pytest.fixture(autouse=True)
    def _model(self, clip_dir: Path) -> None:
        self.params = {"model": str(clip_dir)}

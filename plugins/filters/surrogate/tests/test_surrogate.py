"""Surrogate pixel filter (Gen4Seg Eq. 10): arithmetic on hand-made logits, and a real run
with the ESPNet CamVid model."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from segtk.core.editing import EditedSample, Sample
from segtk.core.errors import PluginError
from segtk_filter_surrogate import SurrogateFilter, class_losses, filter_label, loss_map


def test_loss_map_is_cross_entropy() -> None:
    logits = torch.tensor([[[[2.0, 0.0]], [[0.0, 0.0]]]])  # [1,2,1,2]
    label = torch.tensor([[[0, 255]]])
    loss = loss_map(logits, label, 2)
    assert loss[0, 0, 0].item() == pytest.approx(math.log(1 + math.exp(-2)))
    assert math.isnan(loss[0, 0, 1].item())


def test_class_losses_and_thresholds() -> None:
    lg = class_losses(np.array([4.0, 0.0, 3.0]), np.array([4, 0, 2]))
    assert lg == [1.0, None, 1.5]
    label = np.array([[0, 0, 0, 0, 1, 2, 2, 255]])
    loss = np.array([[0.4, 0.6, 2.0, 2.1, 9.0, 1.8, 3.1, 9.0]])
    out, kept = filter_label(loss, label, lg, alpha=2.0)
    # class 0: keep [0.5, 2]; class 1 has no l_g: kept; class 2: keep [0.75, 3]
    assert out.tolist() == [[255, 0, 0, 255, 1, 2, 255, 255]]
    assert kept == pytest.approx(4 / 7)
    out, kept = filter_label(loss, label, lg, mode="code", margin=1.25)
    # code: only loss > 1.25 l_g -> class 0 > 1.25, class 2 > 1.875
    assert out.tolist() == [[0, 0, 255, 255, 1, 2, 255, 255]]
    assert kept == pytest.approx(4 / 7)


def test_filter_end_to_end_on_hand_made_logits(tmp_path) -> None:
    from segtk.core.data import Dataset, Item
    from segtk.core.segmenter import Segmenter

    class Bright(Segmenter):
        name, classes = "bright", ["dark", "light"]

        def predict(self, images):
            return self.logits(images).argmax(1)

        def logits(self, images):  # class 1 score = 4 * (brightness - 0.5)
            s = 4 * (images.mean(1, keepdim=True) - 0.5)
            return torch.cat([-s, s], 1)

    img = np.zeros((4, 4, 3), np.uint8)
    img[:, 2:] = 255
    lab = np.zeros((4, 4), np.int64)
    lab[:, 2:] = 1
    data = Dataset("toy", ["dark", "light"], [("a", lambda: Item("a", img, lab))])
    f = SurrogateFilter(model=Bright(), alpha=2.0)
    lg = f.prepare(data, tmp_path)
    assert lg[0] == pytest.approx(math.log(1 + math.exp(-4)))
    assert lg[0] == pytest.approx(lg[1])
    assert (tmp_path / "surrogate_lg.json").exists()
    sample = Sample("a", img, lab, np.ones_like(lab, bool), data.classes)
    same = f.apply(sample, EditedSample(img, lab, sample.mask, "x"))
    assert same.scores["kept_fraction"] == 1.0 and (same.label == lab).all()
    bad = img.copy()
    bad[0] = 255 - bad[0]  # first row inverted: its pixels now have a large loss
    res = f.apply(sample, EditedSample(bad, lab, sample.mask, "x"))
    assert (res.label[0] == 255).all() and (res.label[1:] == lab[1:]).all()
    assert res.scores["kept_fraction"] == pytest.approx(0.75)


def test_missing_model_names_the_option() -> None:
    with pytest.raises(PluginError) as err:
        SurrogateFilter()
    assert "surrogate.model" in err.value.hint


def test_real_espnet_camvid(tmp_path) -> None:
    from segtk.core.specs import load_dataset
    from segtk.testing import shared

    weights = shared("models/espnet_camvid.safetensors")
    root = shared("data/camvid")
    data = load_dataset(f"camvid:{root}", "val", limit=3)
    f = SurrogateFilter(model=f"espnet:camvid={weights}")
    f.prepare(data, tmp_path)
    item = data[0]
    sample = Sample(item.name, item.image, item.label, np.ones(item.label.shape, bool), data.classes)
    fractions = {}
    for mode in ("paper", "code"):
        f.mode = mode
        res = f.apply(sample, EditedSample(item.image, item.label, sample.mask, "none"))
        fractions[mode] = res.scores["kept_fraction"]
    noisy = item.image.copy()
    h, w = noisy.shape[:2]
    region = (slice(h // 4, 3 * h // 4), slice(w // 4, 3 * w // 4))
    rng = np.random.default_rng(0)
    noisy[region] = rng.integers(0, 256, noisy[region].shape, dtype=np.uint8)
    res = f.apply(sample, EditedSample(noisy, item.label, sample.mask, "noise"))
    labelled = item.label[region] != 255
    dropped_in_region = float((res.label[region][labelled] == 255).mean())
    f.mode = "paper"
    res_paper = f.apply(sample, EditedSample(noisy, item.label, sample.mask, "noise"))
    dropped_paper = float((res_paper.label[region][labelled] == 255).mean())
    print(f"unedited kept: paper {fractions['paper']:.3f}, code {fractions['code']:.3f}; "
          f"noise region dropped: code {dropped_in_region:.3f}, paper {dropped_paper:.3f}")
    assert fractions["code"] > 0.9
    assert dropped_in_region > 0.5 and dropped_paper > 0.5

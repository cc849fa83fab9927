"""Surrogate pixel filter (Gen4Seg Eq. 10): arithmetic on hand-made logits, and a real run
with the ESPNet CamVid model."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from segtk.core import Dataset, EditedSample, FilterResult, Item, PluginError, Sample, Segmenter
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
    out, kept = filter_label(loss, label, lg, alpha=2.0, mode="paper")
    # paper: class 0: keep [0.5, 2]; class 1 has no l_g: kept; class 2: keep [0.75, 3]
    assert out.tolist() == [[255, 0, 0, 255, 1, 2, 255, 255]]
    assert kept == pytest.approx(4 / 7)
    out, kept = filter_label(loss, label, lg, alpha=2.0)
    # upper (the default): only loss > 2 l_g -> class 0 > 2, class 2 > 3; easy pixels stay
    assert out.tolist() == [[0, 0, 0, 255, 1, 2, 255, 255]]
    assert kept == pytest.approx(5 / 7)
    out, kept = filter_label(loss, label, lg, mode="code", margin=1.25)
    # code: only loss > 1.25 l_g -> class 0 > 1.25, class 2 > 1.875
    assert out.tolist() == [[0, 0, 255, 255, 1, 2, 255, 255]]
    assert kept == pytest.approx(4 / 7)


def pixel_label(result: FilterResult) -> np.ndarray:
    """The label a pixel filter rewrote (a sample filter's result has none)."""
    assert result.label is not None
    return result.label


class Bright(Segmenter):
    name, classes = "bright", ["dark", "light"]

    def predict(self, images):
        return self.logits(images).argmax(1)

    def logits(self, images):  # class 1 score = 4 * (brightness - 0.5)
        s = 4 * (images.mean(1, keepdim=True) - 0.5)
        return torch.cat([-s, s], 1)


def test_filter_end_to_end_on_hand_made_logits(tmp_path) -> None:
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
    assert same.scores["kept_fraction"] == 1.0 and (pixel_label(same) == lab).all()
    bad = img.copy()
    bad[0] = 255 - bad[0]  # first row inverted: its pixels now have a large loss
    res = f.apply(sample, EditedSample(bad, lab, sample.mask, "x"))
    assert (pixel_label(res)[0] == 255).all() and (pixel_label(res)[1:] == lab[1:]).all()
    assert res.scores["kept_fraction"] == pytest.approx(0.75)


def test_default_keeps_an_unedited_image_whose_losses_are_skewed(tmp_path) -> None:
    """As on real data, most pixels are easy and a few hard ones dominate the class mean l_g:
    the default (upper bound only) keeps the easy ones; the printed two-sided rule drops them."""
    img = np.zeros((10, 10, 3), np.uint8)
    img[:, 5:] = 255
    lab = np.zeros((10, 10), np.int64)
    lab[:, 5:] = 1
    img[:4, 4:6] = 255 - img[:4, 4:6]  # 4 hard pixels per class: brightness of the other class
    data = Dataset("skewed", ["dark", "light"], [("a", lambda: Item("a", img, lab))])
    sample = Sample("a", img, lab, np.ones_like(lab, bool), data.classes)
    unedited = EditedSample(img, lab, sample.mask, "none")
    default = SurrogateFilter(model=Bright())
    default.prepare(data, tmp_path)
    kept = default.apply(sample, unedited)
    assert kept.scores["kept_fraction"] == pytest.approx(0.92)  # only the 8 hard pixels go
    assert (pixel_label(kept)[:4, 4:6] == 255).all()
    two_sided = SurrogateFilter(model=Bright(), mode="paper")
    two_sided.prepare(data, tmp_path)
    # every easy pixel lies below l_g/2 and every hard one above 2 l_g: nothing is left
    assert two_sided.apply(sample, unedited).scores["kept_fraction"] == 0.0
    assert default.parameters()["mode"] == "upper" and two_sided.parameters()["mode"] == "paper"


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(PluginError, match="mode 'lower' is not one of upper, paper, code"):
        SurrogateFilter(model=Bright(), mode="lower")
    with pytest.raises(ValueError, match="not one of"):
        filter_label(np.zeros((1, 1)), np.zeros((1, 1), np.int64), [1.0], mode="lower")


def test_missing_model_names_the_option() -> None:
    with pytest.raises(PluginError) as err:
        SurrogateFilter()
    assert "surrogate.model" in str(err.value.hint)


@pytest.mark.shared
def test_real_espnet_camvid(tmp_path, shared_path) -> None:
    """The surrogate is the real ESPNet CamVid model, l_g comes from 3 val images; on the first,
    unedited, the default keeps > 85% of the labelled pixels and the printed two-sided rule
    (still `mode=paper`) far fewer; every mode drops most of a region replaced by noise."""
    from segtk.core import load_dataset
    weights = shared_path("models/espnet_camvid.safetensors")
    root = shared_path("data/camvid")
    data = load_dataset(f"camvid:{root}", "val", limit=3)
    f = SurrogateFilter(model=f"espnet:camvid={weights}")
    f.prepare(data, tmp_path)
    item = data[0]
    sample = Sample(item.name, item.image, item.label, np.ones(item.label.shape, bool), data.classes)
    unedited = EditedSample(item.image, item.label, sample.mask, "none")
    default_kept = f.apply(sample, unedited).scores["kept_fraction"]
    fractions = {}
    for mode in ("upper", "paper", "code"):
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
    dropped_in_region = float((pixel_label(res)[region][labelled] == 255).mean())
    f.mode = "paper"
    res_paper = f.apply(sample, EditedSample(noisy, item.label, sample.mask, "noise"))
    dropped_paper = float((pixel_label(res_paper)[region][labelled] == 255).mean())
    f.mode = "upper"
    res_upper = f.apply(sample, EditedSample(noisy, item.label, sample.mask, "noise"))
    dropped_upper = float((pixel_label(res_upper)[region][labelled] == 255).mean())
    print(f"unedited kept: default {default_kept:.3f}, upper {fractions['upper']:.3f}, "
          f"paper {fractions['paper']:.3f}, code {fractions['code']:.3f}; noise region dropped: "
          f"upper {dropped_upper:.3f}, code {dropped_in_region:.3f}, paper {dropped_paper:.3f}")
    assert default_kept == fractions["upper"] > 0.85
    assert fractions["paper"] < 0.5 * default_kept
    assert fractions["code"] > 0.85
    assert dropped_upper > 0.5 and dropped_in_region > 0.5 and dropped_paper > 0.5

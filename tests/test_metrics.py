"""Metrics against a brute-force reference and hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from segtk.core import ConfusionAccumulator, Proxy, confusion
from segtk.core._metrics import iou_per_class, mean_iou, mean_robustness, pixel_accuracy


def brute_force(pred: np.ndarray, label: np.ndarray, k: int, ignore: int = 255):
    """Per-class IoU by counting pixels one class at a time (no confusion matrix)."""
    valid = (label != ignore) & (label >= 0) & (label < k)
    ious = []
    for c in range(k):
        inter = np.sum((pred == c) & (label == c) & valid)
        union = np.sum(((pred == c) | (label == c)) & valid)
        ious.append(inter / union if union else math.nan)
    acc = np.sum((pred == label) & valid) / valid.sum() if valid.sum() else math.nan
    miou = np.nanmean(ious) if not all(math.isnan(v) for v in ious) else math.nan
    return ious, miou, acc


@st.composite
def pair(draw):
    k = draw(st.integers(1, 6))
    h, w = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    values = st.integers(0, k)  # k = an extra "void" output the classes don't include
    pred = np.array(draw(st.lists(values, min_size=h * w, max_size=h * w))).reshape(h, w)
    labels = st.one_of(st.integers(0, k - 1), st.just(255))
    label = np.array(draw(st.lists(labels, min_size=h * w, max_size=h * w))).reshape(h, w)
    return k, pred, label


@settings(max_examples=200, deadline=None)
@given(pair())
def test_matches_brute_force(case) -> None:
    k, pred, label = case
    conf = confusion(torch.from_numpy(pred), torch.from_numpy(label), k)
    ious, miou, acc = brute_force(pred, label, k)
    got = iou_per_class(conf)[0].tolist()
    for a, b in zip(got, ious):
        assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b)
    m = float(mean_iou(conf)[0])
    assert (math.isnan(m) and math.isnan(miou)) or m == pytest.approx(miou)
    a = float(pixel_accuracy(conf)[0])
    assert (math.isnan(a) and math.isnan(acc)) or a == pytest.approx(acc)


@settings(max_examples=50, deadline=None)
@given(st.lists(pair(), min_size=1, max_size=4))
def test_dataset_miou_accumulates_confusion_not_image_means(cases) -> None:
    k = cases[0][0]
    cases = [c for c in cases if c[0] == k]
    acc = ConfusionAccumulator(k)
    for _, pred, label in cases:
        acc.add(torch.from_numpy(pred)[None], torch.from_numpy(label)[None])
    pred = np.concatenate([c[1].ravel() for c in cases])
    label = np.concatenate([c[2].ravel() for c in cases])
    _, miou, pacc = brute_force(pred, label, k)
    assert (math.isnan(acc.miou) and math.isnan(miou)) or acc.miou == pytest.approx(miou)
    assert (math.isnan(acc.pacc) and math.isnan(pacc)) or acc.pacc == pytest.approx(pacc)


def test_hand_computed_ignore_absent_predicted_only_and_void() -> None:
    # classes 0,1,2; label has 0 and 1 and ignore; 2 is absent from the label but predicted once;
    # 3 is an extra "void" output channel.
    label = torch.tensor([[0, 0, 1, 1, 255, 255]])
    pred = torch.tensor([[0, 1, 1, 2, 0, 3]])
    conf = confusion(pred, label, 3)
    # class 0: tp 1, label 2, pred 1 (the ignore pixel's prediction does not count) -> 1/2
    # class 1: tp 1, label 2, pred 2 -> 1/3 ; class 2: tp 0, union 1 -> 0 (predicted-only counts)
    assert iou_per_class(conf)[0].tolist() == pytest.approx([1 / 2, 1 / 3, 0.0])
    assert float(mean_iou(conf)[0]) == pytest.approx((1 / 2 + 1 / 3 + 0) / 3)
    assert float(pixel_accuracy(conf)[0]) == pytest.approx(2 / 4)
    # a class neither labelled nor predicted is left out of the mean
    conf = confusion(torch.tensor([[0, 3]]), torch.tensor([[0, 1]]), 3)
    ious = iou_per_class(conf)[0].tolist()
    assert ious[0] == 1.0 and ious[1] == 0.0 and math.isnan(ious[2])
    assert float(mean_iou(conf)[0]) == pytest.approx(0.5)  # void prediction for class 1 is wrong


def test_proxy_is_per_image_and_batched() -> None:
    label = torch.tensor([[[0, 1]], [[1, 1]]])
    pred = torch.tensor([[[0, 1]], [[0, 1]]])
    assert Proxy(2)(pred, label).tolist() == pytest.approx([1.0, 0.25])
    assert Proxy(2, kind="pacc")(pred, label).tolist() == pytest.approx([1.0, 0.5])
    all_ignored = torch.full((1, 1, 2), 255)
    assert Proxy(2)(torch.zeros(1, 1, 2, dtype=torch.long), all_ignored).tolist() == [0.0]
    with pytest.raises(ValueError, match="unknown proxy"):
        Proxy(2, kind="dice")


def test_mean_robustness() -> None:
    assert mean_robustness([0.3, 0.5], 0.5) == pytest.approx(0.8)
    with pytest.raises(ValueError):
        mean_robustness([], 0.5)
    assert math.isnan(mean_robustness([0.3], 0.0))  # undefined, not a crash of bench edits


def test_label_confusion_scores_rows_against_their_owners() -> None:
    from segtk.core import LabelConfusion

    g = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 4, (3, 5, 6), generator=g)
    labels[0, 0] = 255
    labels[2, 1] = -1  # outside the class list: never scored
    pred = torch.randint(-1, 6, (4, 5, 6), generator=g)  # -1 and 5 are "wrong" columns
    owners = torch.tensor([2, 0, 0, 1])
    got = LabelConfusion(labels, 4)(pred, owners)
    for row, owner in enumerate(owners.tolist()):
        assert torch.equal(got[row], confusion(pred[row], labels[owner], 4)[0])


def test_the_accumulator_holds_the_summed_confusion_in_int64() -> None:
    """Its total is the confusion of all pixels together (exact counts: int64, as a float32
    would lose pixels past 2^24), whether fed predictions or per-image confusions, with the
    ignore index it was given; iou() is per class of that total."""
    g = torch.Generator().manual_seed(3)
    preds = torch.randint(0, 5, (3, 4, 6), generator=g)
    labels = torch.randint(0, 4, (3, 4, 6), generator=g)
    labels[0, 0] = 2  # ignored below
    by_pred, by_conf = ConfusionAccumulator(4, ignore_index=2), ConfusionAccumulator(4, ignore_index=2)
    per_image = torch.cat([by_pred.add(preds[:2], labels[:2]), by_pred.add(preds[2:], labels[2:])])
    by_conf.add_confusion(per_image[:1])
    by_conf.add_confusion(per_image[1:])
    whole = confusion(preds.reshape(1, -1), labels.reshape(1, -1), 4, ignore_index=2)[0]
    for acc in (by_pred, by_conf):
        assert acc.total.dtype == torch.long and torch.equal(acc.total, whole)
        assert acc.iou() == pytest.approx(iou_per_class(whole).tolist(), nan_ok=True)


def test_ignore_index_255_is_ignored_by_default_even_with_more_classes() -> None:
    """With 300 classes 255 is a valid class id: only the ignore index leaves it out."""
    label = torch.tensor([[0, 255, 299]])
    pred = torch.tensor([[0, 255, 0]])
    conf = confusion(pred, label, 300)[0]
    assert int(conf.sum()) == 2 and int(conf[255].sum()) == 0
    acc = ConfusionAccumulator(300)
    acc.add(pred[None], label[None])
    assert torch.equal(acc.total, conf)
    assert int(confusion(pred, label, 300, ignore_index=-1)[0][255, 255]) == 1


def test_shape_errors_name_both_shapes() -> None:
    from segtk.core import LabelConfusion

    with pytest.raises(ValueError, match=r"^prediction \(1, 2\) and label \(1, 3\) differ$"):
        confusion(torch.zeros(1, 2, dtype=torch.long), torch.zeros(1, 3, dtype=torch.long), 2)
    scorer = LabelConfusion(torch.zeros(1, 2, 3, dtype=torch.long), 2)
    with pytest.raises(ValueError, match=r"^prediction has 4 pixels, labels 6$"):
        scorer(torch.zeros(1, 2, 2, dtype=torch.long))
    empty = scorer(torch.zeros(0, 2, 3, dtype=torch.long))
    assert empty.shape == (0, 2, 3) and empty.dtype == torch.long
    with pytest.raises(ValueError, match="^mR needs at least one edited subset$"):
        mean_robustness([], 0.5)


def test_label_confusion_leaves_out_its_ignore_index_and_ids_outside_the_classes() -> None:
    from segtk.core import LabelConfusion

    labels = torch.tensor([[[-1, 1, 2, 0, 5, 0, 7, 1]]])  # -1, 5 and 7: no class of 3
    pred = torch.tensor([[[0, 1, 2, 1, 0, 2, 3, 1]]])
    for ignore, scored in ((0, [1, 2]), (2, [0, 1])):
        conf = LabelConfusion(labels, 3, ignore_index=ignore)(pred)[0]
        expected = torch.zeros(3, 4, dtype=torch.long)
        for p, y in zip(pred.flatten().tolist(), labels.flatten().tolist()):
            if 0 <= y < 3 and y != ignore:
                expected[y, p] += 1
        assert torch.equal(conf, expected) and sorted(conf.sum(1).nonzero().flatten().tolist()) == \
            sorted(set(scored))
    big = LabelConfusion(torch.tensor([[[0, 255]]]), 300)(torch.tensor([[[0, 255]]]))[0]
    assert int(big.sum()) == 1  # 255 is a class id of 300, ignored by default all the same

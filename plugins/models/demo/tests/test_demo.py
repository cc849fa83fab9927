"""The demo plugin: deterministic scenes, small strict weights, sane predictions, real accuracy."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from segtk.core import ConfusionAccumulator, DataError, ModelError, registry, to_tensor
from segtk_demo.datasets import SHIPPED_SEEDS, fresh, scene_name
from segtk_demo.model import WEIGHTS, DemoNet, DemoSegmenter, load_net
from segtk_demo.scenes import CLASSES, HEIGHT, TRAIN_SEED_BASE, WIDTH, make_scene
from segtk_demo.train import train_seed


@pytest.fixture(scope="module")
def model() -> DemoSegmenter:
    model = registry.segmenter_plugin("demo").load("")
    assert isinstance(model, DemoSegmenter)
    return model


def test_generator_is_deterministic_and_labels_every_pixel() -> None:
    a_img, a_lab = make_scene(7)
    b_img, b_lab = make_scene(7)
    assert np.array_equal(a_img, b_img) and np.array_equal(a_lab, b_lab)
    assert a_img.shape == (HEIGHT, WIDTH, 3) and a_img.dtype == np.uint8
    assert a_lab.shape == (HEIGHT, WIDTH) and a_lab.dtype == np.int64
    assert not np.array_equal(make_scene(8)[0], a_img)
    seen = np.zeros(len(CLASSES), bool)
    for seed in range(6):
        label = make_scene(seed)[1]
        assert label.min() >= 0 and label.max() < len(CLASSES)
        seen |= np.bincount(label.ravel(), minlength=len(CLASSES)) > 0
    assert seen.all(), f"classes never drawn: {[c for c, s in zip(CLASSES, seen) if not s]}"
    image, label = make_scene(3, height=37, width=53)
    assert image.shape == (37, 53, 3) and label.shape == (37, 53)


def test_training_seeds_are_disjoint_from_evaluation() -> None:
    assert train_seed(0, 0) >= TRAIN_SEED_BASE and train_seed(9, 10**6) >= TRAIN_SEED_BASE
    assert max(SHIPPED_SEEDS) < TRAIN_SEED_BASE
    with pytest.raises(DataError):
        fresh(2, TRAIN_SEED_BASE - 1)


def test_weights_are_small_and_load_strictly() -> None:
    from safetensors.torch import load_file

    assert WEIGHTS.stat().st_size < 2_000_000
    state = load_file(str(WEIGHTS))
    assert set(state) == set(DemoNet().state_dict())
    params = sum(p.numel() for p in load_net().parameters())
    assert 50_000 <= params <= 300_000
    assert all(torch.isfinite(v.float()).all() for v in state.values())


def test_stale_weights_fail_loudly(tmp_path) -> None:
    from safetensors.torch import save_file

    state = DemoNet().state_dict()
    state.pop("head.bias")
    save_file(state, str(tmp_path / "bad.safetensors"))
    with pytest.raises(ModelError):
        DemoSegmenter(tmp_path / "bad.safetensors")
    with pytest.raises(ModelError):
        DemoSegmenter(tmp_path / "missing.safetensors")


@pytest.mark.parametrize("size", [(1, 1), (17, 23), (97, 131), (HEIGHT, WIDTH)])
def test_predict_any_size_and_batch_invariant(model: DemoSegmenter, size: tuple[int, int]) -> None:
    images = torch.rand(3, 3, *size, generator=torch.Generator().manual_seed(size[0]))
    labels = model.predict(images)
    assert labels.shape == (3, *size) and labels.dtype == torch.int64
    assert labels.min() >= 0 and labels.max() < len(CLASSES)
    assert model.logits(images).shape == (3, len(CLASSES), *size)
    singles = torch.cat([model.predict(images[i : i + 1]) for i in range(3)])
    assert torch.equal(labels, singles)
    assert torch.equal(model.logits(images), torch.cat([model.logits(x[None]) for x in images]))


def test_fresh_scene_miou_is_at_least_80(model: DemoSegmenter) -> None:
    data = registry.dataset_plugin("demo").load("fresh=16", None)
    assert len(data) == 16 and data.classes == list(CLASSES)
    acc = ConfusionAccumulator(len(CLASSES), data.ignore_index)
    for start in range(0, len(data), 8):
        items = [data[i] for i in range(start, min(start + 8, len(data)))]
        pred = model.predict(to_tensor([it.image for it in items]))
        acc.add(pred, torch.from_numpy(np.stack([it.label for it in items])))
    ious = acc.iou()
    assert acc.total.sum() == 16 * HEIGHT * WIDTH  # every pixel of every scene was scored
    assert all(math.isfinite(v) for v in ious), dict(zip(CLASSES, ious))
    assert acc.miou >= 0.80, f"mIoU {acc.miou:.4f}: {dict(zip(CLASSES, ious))}"


def test_shipped_data_reads_through_the_plugin() -> None:
    info = [i for i in registry.plugins() if i.name == "demo"]
    assert {(i.kind, i.status) for i in info} == {("model", "ok"), ("dataset", "ok")}
    data = registry.dataset_plugin("demo").load("", None)
    assert 6 <= len(data) <= 8 and data.names == [scene_name(s) for s in SHIPPED_SEEDS]
    assert data.palette is not None and data.palette.shape == (len(CLASSES), 3)
    for seed, item in zip(SHIPPED_SEEDS, data):
        image, label = make_scene(seed)  # the files are exactly what make_data would write
        assert np.array_equal(item.image, image) and np.array_equal(item.label, label)


@pytest.mark.parametrize("arg", ["fresh", "fresh=x", "seed=3", "colour=1", "fresh=0"])
def test_bad_dataset_options_are_refused(arg: str) -> None:
    with pytest.raises(DataError):
        registry.dataset_plugin("demo").load(arg, None)

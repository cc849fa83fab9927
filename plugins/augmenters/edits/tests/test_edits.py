"""edits: samples from `segtk edit` folders or editors on the fly, labels consistent."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from segtk.core import AugmentContext, PluginError, build_augmenter, load_dataset, registry
from segtk_augment_edits import Edits


@pytest.fixture(scope="module")
def edit_dir(tmp_path_factory) -> Path:
    """A real `segtk edit` output folder of the demo images (size: a geometry edit)."""
    from segtk.cli import cli

    out = tmp_path_factory.mktemp("edits") / "size"
    result = CliRunner().invoke(cli, ["edit", "--plugin", "size", "--values", "0.5",
                                      "--data", "demo", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


def build_edits(spec: str) -> Edits:
    """`build_augmenter(spec)`, the edits augmenter (a spec of it never means no augmentation)."""
    aug = build_augmenter(spec)
    assert isinstance(aug, Edits)
    return aug


def demo_batch() -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    data = load_dataset("demo")
    images = torch.stack([torch.from_numpy(data[i].image).permute(2, 0, 1) for i in range(4)])
    labels = torch.stack([torch.from_numpy(data[i].label) for i in range(4)])
    return images.float() / 255, labels, list(data.classes)


def test_registered() -> None:
    assert registry.augmenter("edits") is Edits


def test_dir_samples_are_whole_edited_pairs(edit_dir: Path) -> None:
    images, labels, classes = demo_batch()
    aug = build_edits(f"edits:dir={edit_dir},p=1")
    aug.setup(AugmentContext(classes))
    pool = load_dataset(f"edited:{edit_dir}")
    assert len(aug.pool) == len(pool) > 0
    out, lab = aug(images, labels, torch.Generator().manual_seed(0))
    pairs = [(torch.from_numpy(pool[i].image).permute(2, 0, 1).float() / 255,
              torch.from_numpy(pool[i].label)) for i in range(len(pool))]
    for i in range(4):  # every output is one edited image *with its own* label
        assert any(torch.equal(out[i], im) and torch.equal(lab[i], lb) for im, lb in pairs)
    assert aug.stats["replaced"] == 4


@pytest.mark.slow
def test_dir_samples_go_through_the_trainers_prepare(edit_dir: Path) -> None:
    from segtk.jobs.train_samples import random_crop, resize_pair

    images, labels, classes = demo_batch()
    crop = (64, 48)
    small_images, small_labels = images[:, :, :48, :64], labels[:, :48, :64]

    def prepare(image, label, generator):
        x, y = random_crop(*resize_pair(image, label, None), crop, generator)
        return x.float() / 255, y

    aug = build_edits(f"edits:dir={edit_dir},p=1")
    aug.setup(AugmentContext(classes, prepare=prepare))
    out, lab = aug(small_images.contiguous(), small_labels.contiguous(),
                   torch.Generator().manual_seed(1))
    assert out.shape == (4, 3, 48, 64) and lab.shape == (4, 48, 64)
    pool = load_dataset(f"edited:{edit_dir}")
    for i in range(4):  # a crop of some edited image, its label cropped at the same place
        found = False
        for k in range(len(pool)):
            im = torch.from_numpy(pool[k].image).permute(2, 0, 1).float() / 255
            lb = torch.from_numpy(pool[k].label)
            for y0 in range(im.shape[1] - 48 + 1):
                row = im[:, y0:y0 + 48]
                for x0 in range(im.shape[2] - 64 + 1):
                    if torch.equal(row[:, :, x0:x0 + 64], out[i]):
                        found = found or torch.equal(lb[y0:y0 + 48, x0:x0 + 64], lab[i])
            if found:
                break
        assert found, i


def test_on_the_fly_appearance_keeps_labels_and_is_deterministic() -> None:
    images, labels, classes = demo_batch()
    aug = build_edits("edits:editor=color,values=red;blue,p=1,min_area=0.05")
    aug.setup(AugmentContext(classes))
    out, lab = aug(images, labels, torch.Generator().manual_seed(0))
    assert torch.equal(lab, labels)
    assert aug.stats["replaced"] >= 1
    changed = (out - images).abs().amax(1) > 2 / 255
    for i in range(4):  # pixels change inside one single-class region only
        assert lab[i][changed[i]].unique().numel() <= 1
    again = build_edits("edits:editor=color,values=red;blue,p=1,min_area=0.05")
    again.setup(AugmentContext(classes))
    assert torch.equal(again(images, labels, torch.Generator().manual_seed(0))[0], out)


def test_on_the_fly_geometry_moves_labels_with_the_object() -> None:
    images, labels, classes = demo_batch()
    aug = build_edits("edits:editor=size,values=0.5,p=1,min_area=0.05")
    aug.setup(AugmentContext(classes))
    out, lab = aug(images, labels, torch.Generator().manual_seed(0))
    moved = (lab != labels)
    assert moved.any()
    assert (lab[moved] == 255).any()  # the uncovered area is ignore
    assert np.isin(lab.unique().numpy(), list(range(len(classes))) + [255]).all()


def test_bad_parameters(edit_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(PluginError, match="exactly one of dir= and editor="):
        build_edits("edits")
    with pytest.raises(PluginError, match="exactly one of"):
        build_edits(f"edits:dir={edit_dir},editor=color")
    with pytest.raises(PluginError, match="values= goes with editor="):
        build_edits(f"edits:dir={edit_dir},values=red")
    aug = build_edits(f"edits:dir={edit_dir}")
    with pytest.raises(PluginError, match="has classes"):
        aug.setup(AugmentContext(["a", "b"]))
    with pytest.raises(PluginError, match="no value 'octarine'"):
        build_edits("edits:editor=color,values=octarine").setup(AugmentContext(["a"]))
    from segtk.core import DataError
    with pytest.raises(DataError, match="not found"):
        build_edits(f"edits:dir={tmp_path / 'nope'}").setup(AugmentContext(["a"]))

"""edits: the appearance/geometry share (Gen4Seg Tab. VI mixes them 50/50), the share drawn as
recorded, and the refusal of edit folders made from another split than the training one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from click.testing import CliRunner

import segtk
from segtk.core import AugmentContext, PluginError, SegtkError, build_augmenter, load_dataset
from segtk_augment_edits import Edits


def build_edits(spec: str) -> Edits:
    """`build_augmenter(spec)`, the edits augmenter (a spec of it never means no augmentation)."""
    aug = build_augmenter(spec)
    assert isinstance(aug, Edits)
    return aug


def segtk_edit(out: Path, plugin: str, value: str) -> Path:
    from segtk.cli import cli

    result = CliRunner().invoke(cli, ["edit", "--plugin", plugin, "--values", value,
                                      "--data", "demo", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    """Real `segtk edit` folders of the demo images: one appearance edit, one geometry edit."""
    root = tmp_path_factory.mktemp("edits")
    return {"appearance": segtk_edit(root / "color", "color", "red"),
            "geometry": segtk_edit(root / "size", "size", "0.5")}


def both(folders: dict[str, Path]) -> str:
    return f"{folders['appearance']};{folders['geometry']}"


def classes() -> list[str]:
    return list(load_dataset("demo").classes)


def set_up(spec: str, **context: Any) -> Edits:
    aug = build_edits(spec)
    aug.setup(AugmentContext(classes(), **context))
    return aug


def edited_from(folder: Path, split: str | None, dest: Path) -> Path:
    """A copy of an edit folder whose run.json says it was edited from `split`."""
    shutil.copytree(folder, dest)
    run = json.loads((dest / "run.json").read_text())
    run["config"]["split"] = split
    (dest / "run.json").write_text(json.dumps(run))
    return dest


def test_pool_kinds_come_from_the_manifest(folders) -> None:
    aug = set_up(f"edits:dir={both(folders)}")
    sizes = {k: len(load_dataset(f"edited:{d}")) for k, d in folders.items()}
    assert aug.pool_kinds == ["appearance"] * sizes["appearance"] + ["geometry"] * sizes["geometry"]


@pytest.mark.parametrize("share", [0.0, 0.3, 0.5, 1.0])
def test_the_drawn_share_is_the_asked_one(folders, share) -> None:
    aug = set_up(f"edits:dir={both(folders)},geometry_share={share}")
    rng = np.random.default_rng(0)
    draws = [aug.pool_kinds[aug.draw(rng)] for _ in range(4000)]
    drawn = aug.drawn()
    assert drawn["geometry"] == draws.count("geometry")
    assert drawn["appearance"] == draws.count("appearance")
    assert drawn["geometry"] + drawn["appearance"] == 4000
    # 4 standard deviations of a binomial share over 4000 draws (0 at the ends: exact)
    assert drawn["geometry_share"] == pytest.approx(share, abs=4 * (share * (1 - share) / 4000) ** 0.5)
    if share in (0.0, 1.0):
        assert set(draws) == {"geometry" if share else "appearance"}
    assert aug.drawn()["geometry"] == 0  # each call starts a new count


def test_without_a_share_the_draws_are_as_before(folders) -> None:
    """Unset, one uniform draw over the whole pool: the same samples as before the option."""
    aug = set_up(f"edits:dir={both(folders)}")
    rng, old = np.random.default_rng(3), np.random.default_rng(3)
    assert [aug.draw(rng) for _ in range(50)] == [int(old.integers(len(aug.pool))) for _ in range(50)]
    assert "geometry_share" not in aug.parameters()  # run.json as before: old runs resume


def test_a_training_batch_takes_its_edits_from_the_drawn_kind(folders) -> None:
    data = load_dataset("demo")
    images = torch.stack([torch.from_numpy(data[i].image).permute(2, 0, 1) for i in range(4)]) / 255
    labels = torch.stack([torch.from_numpy(data[i].label) for i in range(4)])
    for share, kind in ((0, "appearance"), (1, "geometry")):
        aug = set_up(f"edits:dir={both(folders)},p=1,geometry_share={share}")
        pool = load_dataset(f"edited:{folders[kind]}")
        pairs = [(torch.from_numpy(pool[i].image).permute(2, 0, 1).float() / 255,
                  torch.from_numpy(pool[i].label)) for i in range(len(pool))]
        out, lab = aug(images.float(), labels, torch.Generator().manual_seed(0))
        for i in range(4):
            assert any(torch.equal(out[i], im) and torch.equal(lab[i], lb) for im, lb in pairs)
        assert aug.drawn() == {"replaced": 4, "skipped": 0, "appearance": 4 * (1 - share),
                               "geometry": 4 * share, "geometry_share": float(share)}
    assert set_up(f"edits:dir={both(folders)},geometry_share=0.5").parameters()["geometry_share"] == 0.5


def test_on_the_fly_editors_are_drawn_by_kind_too() -> None:
    aug = set_up("edits:editor=color;size,geometry_share=1")
    rng = np.random.default_rng(1)
    assert {aug.editors[aug.draw(rng)][0].kind for _ in range(40)} == {"geometry"}


@pytest.mark.parametrize("value", ["1.5", "-0.1", "abc", "nan"])
def test_a_share_outside_0_1_is_refused(folders, value) -> None:
    with pytest.raises(PluginError, match="geometry_share"):
        build_edits(f"edits:dir={both(folders)},geometry_share={value}")


def test_a_share_needs_the_kinds_it_draws(folders) -> None:
    with pytest.raises(PluginError, match="geometry_share=0.5 draws geometry edits but "
                                          rf"dir={folders['appearance']} has none"):
        set_up(f"edits:dir={folders['appearance']},geometry_share=0.5")
    with pytest.raises(PluginError, match="draws appearance edits"):
        set_up(f"edits:dir={folders['geometry']},geometry_share=0")
    set_up(f"edits:dir={folders['geometry']},geometry_share=1")  # geometry only: fine


def test_a_folder_edited_from_another_split_is_refused(folders, tmp_path) -> None:
    val = edited_from(folders["appearance"], "val", tmp_path / "val")
    with pytest.raises(PluginError) as refused:
        set_up(f"edits:dir={val}", data="demo", split="train")
    text = str(refused.value)
    assert f"{val} was edited from split 'val'" in text and "training uses split 'train'" in text
    assert "--split train" in str(refused.value.hint)
    with pytest.raises(PluginError, match="edited from split none .* training uses split 'train'"):
        set_up(f"edits:dir={folders['appearance']}", data="demo", split="train")
    set_up(f"edits:dir={edited_from(folders['appearance'], 'train', tmp_path / 'train')}",
           data="demo", split="train")  # the training split: taken
    set_up(f"edits:dir={val}")  # set up by hand (no training data known): not checked


def test_a_folder_that_does_not_record_its_split_is_refused(folders, tmp_path) -> None:
    bare = tmp_path / "bare"
    shutil.copytree(folders["appearance"], bare)
    (bare / "run.json").unlink()
    with pytest.raises(PluginError, match=f"{bare} does not record the split it was edited from"):
        set_up(f"edits:dir={bare}", data="demo", split=None)


@pytest.fixture(scope="module")
def random_demo(tmp_path_factory) -> str:
    from segtk.core import save_safetensors
    from segtk_demo.model import DemoNet

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("weights") / "random.safetensors"
    save_safetensors(path, DemoNet().state_dict())
    return f"demo:{path}"


def test_training_refuses_val_edits_and_records_the_drawn_share(folders, random_demo, tmp_path) -> None:
    """Through `segtk.train`: the trainer tells the augmenter its split, and each epoch's record
    holds the kinds drawn."""
    val = edited_from(folders["geometry"], "val", tmp_path / "val")
    train: dict[str, Any] = dict(split="", epochs=2, batch_size=4, crop=(64, 48), lr=3e-3)
    with pytest.raises(SegtkError, match=f"{val} was edited from split 'val'.*training uses split none"):
        segtk.train(random_demo, "demo", tmp_path / "refused",
                    f"edits:dir={folders['appearance']};{val},geometry_share=0.5", **train)
    assert not (tmp_path / "refused").exists()
    out = tmp_path / "run"
    segtk.train(random_demo, "demo", out, f"edits:dir={both(folders)},geometry_share=0.5,p=1",
                **train)
    epochs = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    images = len(load_dataset("demo"))
    for epoch in epochs:  # p=1: every image of the epoch replaced, each by one kind
        drawn = epoch["augmenter"]
        assert drawn["replaced"] == drawn["appearance"] + drawn["geometry"] == images
        assert drawn["geometry_share"] == round(drawn["geometry"] / images, 4)
    assert sum(e["augmenter"]["geometry"] for e in epochs) not in (0, 2 * images)  # both kinds
    config = json.loads((out / "run.json").read_text())["config"]
    assert config["augmenter"]["geometry_share"] == 0.5

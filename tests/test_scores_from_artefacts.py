"""Every number `segtk attack` and `segtk bench edits` report, recomputed from what they stored — the adversarial PNGs, the
clean images and the label files — with a plain numpy mIoU written here (not segtk's confusion,
proxy or accumulators, and not the confusion matrices the records carry). The labels have
ignored (255) pixels, so a score that counts them shows."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from PIL import Image

import segtk
from segtk.cli import cli
from segtk.core import load_dataset, load_segmenter

pytest.importorskip("segtk_demo")
IGNORE = 255


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Three demo scenes as a folder dataset, a band of each label set to ignore."""
    root = tmp_path_factory.mktemp("data")
    demo = load_dataset("demo")
    (root / "images").mkdir()
    (root / "labels").mkdir()
    (root / "classes.txt").write_text("\n".join(demo.classes) + "\n")
    for i in range(3):
        item = demo[i]
        label = item.label.astype(np.uint8)
        label[: label.shape[0] // 4] = IGNORE
        Image.fromarray(item.image).save(root / "images" / f"{item.name}.png")
        Image.fromarray(label).save(root / "labels" / f"{item.name}.png")
    return root, len(demo.classes)


def predict(model, path) -> np.ndarray:
    rgb = np.asarray(Image.open(path).convert("RGB"), dtype=np.float32) / 255
    return model.predict(torch.from_numpy(rgb).permute(2, 0, 1)[None].contiguous())[0].numpy()


def counts(pred: np.ndarray, label: np.ndarray, k: int) -> np.ndarray:
    """[k, 3]: per class, true positives, labelled pixels of the class, predictions of it
    on labelled pixels."""
    keep = label != IGNORE
    p, t = pred[keep], label[keep]
    return np.array([[np.sum((p == c) & (t == c)), np.sum(t == c), np.sum(p == c)] for c in range(k)])


def miou(c: np.ndarray) -> float:
    union = c[:, 1] + c[:, 2] - c[:, 0]
    return float(np.mean(c[union > 0, 0] / union[union > 0]))


def pacc(c: np.ndarray) -> float:
    return float(c[:, 0].sum() / c[:, 1].sum())


def test_attack_records_and_table_are_what_the_stored_pngs_score(folder, tmp_path) -> None:
    root, k = folder
    run = segtk.attack("demo", f"folder:{root}", attack="dla", budget=12, eps=8, out=tmp_path / "a",
                       batch_size=2)
    model = load_segmenter("demo")
    clean_total, adv_total = np.zeros((k, 3)), np.zeros((k, 3))
    records = {r["image"]: r for r in run.records}
    assert sorted(records) == ["scene_000", "scene_001", "scene_002"]
    for name, rec in records.items():
        label = np.asarray(Image.open(root / "labels" / f"{name}.png")).astype(np.int64)
        clean_png, adv_png = root / "images" / f"{name}.png", tmp_path / "a" / "images" / f"{name}.png"
        clean = counts(predict(model, clean_png), label, k)
        adv = counts(predict(model, adv_png), label, k)
        clean_total, adv_total = clean_total + clean, adv_total + adv
        assert rec["clean_miou"] == pytest.approx(miou(clean)), name
        assert rec["adv_miou"] == pytest.approx(miou(adv)), name
        assert rec["clean_pacc"] == pytest.approx(pacc(clean)), name
        assert rec["adv_pacc"] == pytest.approx(pacc(adv)), name
        stored = np.asarray(Image.open(adv_png).convert("RGB")).astype(int)
        source = np.asarray(Image.open(clean_png).convert("RGB")).astype(int)
        assert rec["linf"] == np.abs(stored - source).max() <= 8
        assert rec["queries"] == 12
    assert run.adv_miou < run.clean_miou, "the attack changed nothing: the check would be weak"
    assert run.clean_miou == pytest.approx(100 * miou(clean_total))  # the run's numbers are in %
    assert run.adv_miou == pytest.approx(100 * miou(adv_total))
    assert run.summary["adv_pacc"] == pytest.approx(100 * pacc(adv_total))
    per_image = [records[n]["adv_miou"] for n in sorted(records)]  # records: fractions, as stored
    assert run.adv_image_miou == pytest.approx(100 * np.mean(per_image))


def object_miou(c: np.ndarray) -> float:
    """Object-pixel subsets: the mean IoU over the classes present in the scored labels."""
    union = c[:, 1] + c[:, 2] - c[:, 0]
    return float(np.mean(c[c[:, 1] > 0, 0] / union[c[:, 1] > 0]))


def test_bench_edits_table_is_what_its_stored_edits_score(tmp_path) -> None:
    """Each subset's mIoU from the edited PNGs and labels under OUT/edits (geometry levels on the
    pixels of their saved object masks), Original and Original-object from the saved sources."""
    pytest.importorskip("segtk_editor_size")
    out = tmp_path / "e"
    result = CliRunner().invoke(cli, ["bench", "edits", "--models", "demo", "--attributes", "color,size",
                                      "--values", "color=red,blue,green", "--values", "size=0.2,0.4",
                                      "--limit", "3", "--executor", "inline", "--quiet", "--out", str(out)])
    assert result.exit_code == 0, result.output
    table = json.loads((out / "table.json").read_text())["miou"]["demo"]
    model = load_segmenter("demo")
    k = len(load_dataset("demo").classes)

    def score(images, labels, masks=None) -> np.ndarray:
        total = np.zeros((k, 3))
        for image in sorted(images.glob("*.png")):
            label = np.asarray(Image.open(labels / image.name)).astype(np.int64)
            if masks is not None:
                label = np.where(np.asarray(Image.open(masks / image.name)) > 0, label, IGNORE)
            total += counts(predict(model, image), label, k)
        return total

    edits = out / "edits"
    for subset in ("color", "size-0.2", "size-0.4"):
        folder = edits / subset
        object_only = subset.startswith("size")
        c = score(folder / "images", folder / "labels", folder / "masks" if object_only else None)
        assert table[subset] == pytest.approx(100 * (object_miou(c) if object_only else miou(c))), subset
    sources = edits / "size-0.2" / "source"  # the object-centric sources every subset edits
    assert table["original"] == pytest.approx(100 * miou(score(sources / "images", sources / "labels")))
    obj = score(sources / "images", sources / "labels", edits / "original-object" / "masks")
    assert table["original-object"] == pytest.approx(100 * object_miou(obj))

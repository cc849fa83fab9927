"""What `segtk attack` records for each image, checked field by field against an independent
computation: its seed, history, confusions under the dataset's ignore index, overlays, the
clean answer it reuses, the images it reports, and how model failures are named."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

import segtk
from segtk.core import (
    Attack,
    DataError,
    Dataset,
    Item,
    ModelError,
    Oracle,
    Segmenter,
    SegtkError,
    confusion,
    project,
    read_image,
    to_tensor,
)
from segtk.core._data import default_palette
from segtk.imaging import overlay
from segtk.jobs.attack import (
    MODEL_HINT,
    AttackRecord,
    attack_dataset,
    evaluate,
    image_seed,
    quantise,
)
from segtk.storage.runs import RunDir
from segtk.testing import TinySegmenter, toy_batch
from segtk_dla import DLA

CLASSES = TinySegmenter().classes


def constant(item: Item) -> Callable[[], Item]:
    """A dataset loader that returns `item`."""
    return lambda: item


def dataset(n: int = 3, ignore: int = 255, blank: bool = False) -> Dataset:
    """`n` 8-bit images labelled by the tiny model, a corner of each labelled `ignore`
    (every pixel with `blank`)."""
    images = np.round(toy_batch(n, 9, 11, seed=2)[0].permute(0, 2, 3, 1).numpy() * 255).astype(np.uint8)
    labels = TinySegmenter().predict(to_tensor(list(images))).numpy()
    labels[:, :3, :3] = ignore
    if blank:
        labels[:] = ignore
    items = [Item(f"img{i}", images[i], labels[i]) for i in range(n)]
    return Dataset("toy", list(CLASSES), [(it.name, constant(it)) for it in items],
                   ignore_index=ignore)


def attack(data: Dataset, out: Path, model=None, batch_size: int = 2, attack_=None, **kw):
    run = RunDir(out, {"t": 1}, False, kind="attack")
    summary = attack_dataset(attack_ or DLA(budget=6), model or TinySegmenter(), data, run,
                             batch_size=batch_size, **kw)
    return summary, run


def test_each_image_is_attacked_with_its_own_named_stream_whatever_its_batch(tmp_path) -> None:
    """Batches of 2 and of 1 give the same records, and each is the run of its image alone with
    the seed image_seed(seed, name): the history is that run's, rounded to 6 digits."""
    data = dataset()
    pairs, _ = attack(data, tmp_path / "pairs")
    ones, _ = attack(data, tmp_path / "ones", batch_size=1)
    assert pairs.records == ones.records
    for rec, item in zip(pairs.records, data):
        x, y = to_tensor([item.image]), torch.from_numpy(item.label)[None]
        alone = DLA(budget=6).run(TinySegmenter(), x, y, seeds=[image_seed(0, item.name)])
        assert rec["history"] == [round(v, 6) for v in alone.history[0]]
        assert rec["queries"] == 6 and rec["attack_proxy"] == float(alone.scores[0])
    assert len({tuple(r["history"]) for r in pairs.records}) == 3  # not all alike


def test_the_dataset_ignore_index_rules_the_attack_the_scores_and_the_overlays(tmp_path) -> None:
    data = dataset(n=2, ignore=3)  # class id 3 is this dataset's ignore label
    summary, run = attack(data, tmp_path / "r")
    for rec, item in zip(summary.records, data):
        y = torch.from_numpy(item.label)
        x = to_tensor([item.image])
        clean_pred = TinySegmenter().predict(x)[0]
        assert rec["clean_confusion"] == confusion(clean_pred, y, 4, ignore_index=3)[0].tolist()
        stored = read_image(run.path / "images" / f"{item.name}.png")
        adv_pred = TinySegmenter().predict(to_tensor([stored]))[0]
        assert rec["adv_confusion"] == confusion(adv_pred, y, 4, ignore_index=3)[0].tolist()
        alone = DLA(budget=6).run(TinySegmenter(), x, y[None], seeds=[image_seed(0, item.name)],
                                  ignore_index=3)
        assert rec["history"] == [round(v, 6) for v in alone.history[0]]
        palette = default_palette(4)
        for suffix, image, pred in (("clean", item.image, clean_pred), ("adv", stored, adv_pred)):
            drawn = read_image(run.path / "overlays" / f"{item.name}_{suffix}.png")
            assert np.array_equal(drawn, overlay(image, pred.numpy(), palette, ignore_index=3))


def test_an_image_without_labelled_pixels_scores_0_not_nan(tmp_path) -> None:
    summary, _ = attack(dataset(n=1, blank=True), tmp_path / "r")
    rec = summary.records[0]
    assert (rec["clean_miou"], rec["adv_miou"], rec["clean_pacc"], rec["adv_pacc"]) == (0, 0, 0, 0)


class Counting(TinySegmenter):
    """Counts its calls and can fail at one of them."""

    def __init__(self, fail_at: int | None = None) -> None:
        super().__init__()
        self.fail_at = fail_at

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        if self.calls + 1 == self.fail_at:
            self.calls += 1
            raise RuntimeError("out of memory")
        return super().predict(images)


class NeverClean(Attack):
    """Queries clean + ε only: the job has to ask for the clean labels itself."""

    name = "never-clean"

    def attack(self, oracle: Oracle) -> None:
        oracle.query(project(oracle.clean + oracle.eps_unit, oracle.clean, oracle.eps_unit))


def test_the_clean_answer_is_reused_and_asked_for_only_when_missing(tmp_path) -> None:
    data = dataset()
    model = Counting()
    reused, _ = attack(data, tmp_path / "dla", model, batch_size=3)
    assert model.calls == 6 + 1  # DLA's first query is the clean batch; then the stored images
    model = Counting()
    asked, _ = attack(data, tmp_path / "never", model, batch_size=3, attack_=NeverClean(budget=1))
    assert model.calls == 1 + 2  # its query, then the clean and the stored images
    assert [r["clean_confusion"] for r in asked.records] == [r["clean_confusion"] for r in reused.records]


def test_the_model_failing_on_the_stored_images_is_named_with_the_resume_hint(tmp_path) -> None:
    with pytest.raises(ModelError) as err:
        attack(dataset(n=2), tmp_path / "r", Counting(fail_at=7))  # after DLA's 6 queries
    assert err.value.message == "while attacking img0, img1: the model raised RuntimeError: out of memory"
    assert err.value.hint == MODEL_HINT


def test_evaluate_names_the_model_of_a_wrong_answer() -> None:
    class Cropping(TinySegmenter):
        name = "cropping"

        def predict(self, images):
            return super().predict(images)[:, 1:]

    with pytest.raises(ModelError, match=r"^model cropping returned labels of shape \(1, 3, 5\)"):
        evaluate(Cropping(), torch.rand(1, 3, 4, 5))


def test_on_image_reports_every_image_once_in_dataset_order_also_on_resume(tmp_path) -> None:
    data = dataset()
    seen: list[AttackRecord] = []
    with RunDir(tmp_path / "r", {"t": 1}, False, kind="attack") as run:
        attack_dataset(DLA(budget=6), TinySegmenter(), data.subset(names=["img1"]), run,
                       on_image=seen.append)
    assert [r["image"] for r in seen] == ["img1"]
    first = seen[0]
    seen.clear()
    with RunDir(tmp_path / "r", {"t": 1}, True, kind="attack") as run:
        summary = attack_dataset(DLA(budget=6), TinySegmenter(), data, run, on_image=seen.append)
    assert [r["image"] for r in seen] == ["img1", "img0", "img2"]  # the done one first
    assert seen[0] == first and seen[1:] == [summary.records[0], summary.records[2]]


def test_classes_are_checked_unless_taken_from_the_data(tmp_path) -> None:
    """The attack job checks the model's classes against the data's before it writes anything
    (once: its batches do not check again, see tests/test_preconditions_once.py)."""
    data = dataset(n=1)
    data.classes = ["road", "car", "sky", "tree"]  # four, named otherwise
    with pytest.raises(DataError, match="name their classes differently"):
        segtk.attack(TinySegmenter(), data, budget=6, out=tmp_path / "a")
    assert not (tmp_path / "a").exists()
    run = segtk.attack(TinySegmenter(), data, budget=6, out=tmp_path / "b", classes_from_data=True,
                       warn=lambda message: None)
    assert len(run.records) == 1


@pytest.mark.parametrize("steps", [3, 5, 100])  # odd: round-half-to-even would go up
def test_quantise_rounds_in_the_images_own_dtype(steps: int) -> None:
    """A float64 value just under a half step rounds down, as the plain formula in float64 does;
    computed in float32 it would become the half step and round to the even neighbour."""
    adv = torch.full((1, 3, 1, 1), (steps + 0.5 - 1e-9) / 255, dtype=torch.float64)
    clean = np.full((1, 1, 1, 3), steps, dtype=np.uint8)
    assert quantise(adv, clean, 8.0).tolist() == [[[[steps] * 3]]]


def test_an_image_cut_short_by_the_time_limit_says_so(tmp_path, monkeypatch) -> None:
    from segtk.core import _segmenter as segmenter_module
    ticks = iter(range(1, 10_000))
    monkeypatch.setattr(segmenter_module, "monotonic", lambda: float(next(ticks)))
    summary, _ = attack(dataset(n=2), tmp_path / "r", batch_size=1,
                        attack_=DLA(budget=6, time_limit=2.5))  # a clock read per query: 2 fit
    assert [(r["queries"], r.get("stopped")) for r in summary.records] == [(2, "time"), (2, "time")]
    done, _ = attack(dataset(n=1), tmp_path / "s", attack_=DLA(budget=6))
    assert "stopped" not in done.records[0]


def test_a_white_box_attack_on_a_model_without_gradients_is_refused_before_any_query(tmp_path) -> None:
    class LabelsOnly(TinySegmenter):
        name = "labels-only"
        logits = Segmenter.logits  # the contract's (TinySegmenter's base): none

    model = LabelsOnly()
    with pytest.raises(SegtkError, match="is white-box: it needs the gradients .* model .labels-only."):
        segtk.attack(model, dataset(n=1), attack="pgd", budget=2, out=tmp_path / "r")
    assert model.calls == 0 and not (tmp_path / "r").exists()

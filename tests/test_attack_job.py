"""Attacking a dataset: stored 8-bit images, per-image records, errors and resume."""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from segtk.api.results import MemoryRun
from segtk.core import Dataset, Item, ModelError, SegtkError, load_dataset, read_image, to_tensor
from segtk.jobs.attack import attack_dataset, quantise
from segtk.storage.runs import RunDir, read_results
from segtk.testing import GridSegmenter, TinySegmenter
from segtk_dla import DLA
from segtk_random import RandomAttack

KEYS = {"image", "clean_miou", "adv_miou", "clean_pacc", "adv_pacc", "queries", "linf", "history"}


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 255), st.floats(-0.2, 1.2), st.sampled_from([1.0, 2.5, 8.0, 16.0]))
def test_quantise_stays_in_the_ball_and_box(clean: int, adv: float, eps: float) -> None:
    clean_u8 = np.full((1, 2, 2, 3), clean, dtype=np.uint8)
    stored = quantise(torch.full((1, 3, 2, 2), adv), clean_u8, eps)
    assert np.abs(stored.astype(int) - clean).max() <= eps


def constant(item: Item) -> Callable[[], Item]:
    """A dataset loader that returns `item`."""
    return lambda: item


def run(tmp_path, folder, model=None, resume=False, budget=8, name="run"):
    data = load_dataset(f"folder:{folder}")
    rd = RunDir(tmp_path / name, {"budget": budget}, resume, kind="attack")
    return attack_dataset(DLA(budget=budget), model or TinySegmenter(), data, rd, batch_size=2), rd


def test_records_images_and_overlays(tmp_path, folder_dataset) -> None:
    summary, rd = run(tmp_path, folder_dataset)
    records = read_results(rd.path / "results.jsonl")
    assert set(records) == {"img0", "img1", "img2"}
    for name, rec in records.items():
        assert KEYS <= rec.keys()
        assert rec["queries"] == 8 and len(rec["history"]) == 8
        stored = read_image(rd.path / "images" / f"{name}.png")
        clean = read_image(folder_dataset / "images" / f"{name}.png")
        assert np.abs(stored.astype(int) - clean.astype(int)).max() == rec["linf"] <= 8
        assert (rd.path / "overlays" / f"{name}_adv.png").exists()
        # the reported adversarial mIoU is the stored PNG's, not the float image's
        label = load_dataset(f"folder:{folder_dataset}").subset(names=[name])[0].label
        from segtk.core import Proxy

        pred = TinySegmenter().predict(to_tensor([stored]))
        assert rec["adv_miou"] == pytest.approx(float(Proxy(4)(pred, torch.from_numpy(label)[None])[0]))
    assert summary.table["images"] == 3 and summary.table["max_linf"] <= 8


@pytest.mark.parametrize("attack", [RandomAttack(budget=4), DLA(budget=10, values="continuous")])
def test_the_record_scores_the_stored_8bit_image_not_the_float_candidate(tmp_path, attack) -> None:
    """These attacks' candidates lie between the 8-bit steps: the grid model is fooled by the
    float candidates (proxy 0) and by none of the stored PNGs, so each record must say 1."""
    rng = np.random.default_rng(0)
    items = [Item(f"g{i}", rng.integers(20, 235, (6, 8, 3), dtype=np.uint8),
                  np.ones((6, 8), dtype=np.int64)) for i in range(3)]
    data = Dataset("grid", ["zero", "one"], [(it.name, constant(it)) for it in items])
    rd = RunDir(tmp_path / "r", {"budget": 4}, False, kind="attack")
    summary = attack_dataset(attack, GridSegmenter(), data, rd, batch_size=2)
    for rec, item in zip(summary.records, items):
        assert rec["attack_proxy"] == 0  # the float candidate fooled the model...
        assert (rec["clean_miou"], rec["adv_miou"], rec["adv_pacc"]) == (1, 1, 1)  # ...not the PNG
        stored = read_image(rd.path / "images" / f"{item.name}.png")
        assert rec["linf"] == np.abs(stored.astype(int) - item.image.astype(int)).max() <= 8
    assert summary.table["adv_miou"] == 1.0


class FailsOn(TinySegmenter):
    """Raises (or returns NaN scores) once it sees a given image."""

    def __init__(self, bad_value: float, mode: str = "raise") -> None:
        super().__init__()
        self.bad_value, self.mode = bad_value, mode

    def predict(self, images):
        if bool((images[:, 0, 1, 1] == self.bad_value).any()):
            if self.mode == "raise":
                raise RuntimeError("CUDA fell over")
            from segtk.core import labels_from_logits
            return labels_from_logits(torch.full((images.shape[0], 4, *images.shape[2:]), float("nan")))
        return super().predict(images)


@pytest.mark.parametrize("mode,message", [("raise", "the model raised RuntimeError"), ("nan", "NaN")])
def test_model_failure_names_the_image_and_keeps_results(tmp_path, folder_dataset, mode, message) -> None:
    img2 = read_image(folder_dataset / "images" / "img2.png")
    bad = FailsOn(float(img2[1, 1, 0]) / 255, mode)
    data = load_dataset(f"folder:{folder_dataset}")
    rd = RunDir(tmp_path / "r", {"budget": 8}, False, kind="attack")
    with pytest.raises(SegtkError, match=f"while attacking img2: .*{message}"):
        attack_dataset(DLA(budget=8), bad, data, rd, batch_size=1)
    assert set(read_results(rd.path / "results.jsonl")) == {"img0", "img1"}


def test_resume_gives_the_uninterrupted_table(tmp_path, folder_dataset) -> None:
    full, _ = run(tmp_path, folder_dataset, name="full")
    img2 = read_image(folder_dataset / "images" / "img2.png")
    with pytest.raises(ModelError):
        run(tmp_path, folder_dataset, model=FailsOn(float(img2[1, 1, 0]) / 255), name="part")
    # each finished record gets a mark a recomputed one would not have; then a crash mid-write
    # leaves a torn line: it is dropped on resume, and only it
    path = tmp_path / "part" / "results.jsonl"
    kept = b"".join(line.replace(b"{", b'{"kept":1,', 1) for line in path.read_bytes().splitlines(True))
    path.write_bytes(kept + b'{"image": "img2", "clean_m')
    resumed, rd = run(tmp_path, folder_dataset, resume=True, name="part")
    assert resumed.table == full.table
    raw = path.read_bytes()
    assert raw.startswith(kept) and kept.count(b"\n") == 2  # img0 and img1, byte for byte
    assert [json.loads(line)["image"] for line in raw[len(kept):].splitlines()] == ["img2"]


def test_on_stored_sees_each_scored_image_and_only_a_run_with_a_folder_saves_images(
        tmp_path, folder_dataset, monkeypatch) -> None:
    """`on_stored(name, image)` gets, per image, the 8-bit image its record is scored on: the PNG
    a run with images stores. With save_images=False a run writes no image, and a run in memory
    (no folder: the Python API's) none whatever save_images says, with the same records."""
    full, rd = run(tmp_path, folder_dataset)
    data = load_dataset(f"folder:{folder_dataset}")
    seen: dict[str, np.ndarray] = {}
    plain = RunDir(tmp_path / "plain", {"budget": 8}, False, kind="attack")
    attack_dataset(DLA(budget=8), TinySegmenter(), data, plain, batch_size=2, save_images=False,
                   on_stored=seen.__setitem__)
    assert not (plain.path / "images").exists() and not (plain.path / "overlays").exists()
    assert sorted(seen) == ["img0", "img1", "img2"]
    for name, image in seen.items():
        assert np.array_equal(image, read_image(rd.path / "images" / f"{name}.png")), name
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    memory = MemoryRun()
    in_memory = attack_dataset(DLA(budget=8), TinySegmenter(), data, memory, batch_size=2)
    assert list((tmp_path / "cwd").iterdir()) == [] and in_memory.table == full.table
    assert memory.records == list(read_results(rd.path / "results.jsonl").values())


def test_run_dir_refuses_mixing_runs(tmp_path, folder_dataset) -> None:
    run(tmp_path, folder_dataset, name="x")
    with pytest.raises(SegtkError, match="already holds results") as exc:
        run(tmp_path, folder_dataset, name="x")
    assert "--resume" in str(exc.value.hint)
    with pytest.raises(SegtkError, match=r"holds a run with other settings \(budget\)"):
        run(tmp_path, folder_dataset, resume=True, budget=9, name="x")


class OutOfBall(DLA):
    """A broken attack that steps past ε without projecting."""

    def attack(self, oracle) -> None:
        oracle.query(oracle.clean + 2 * oracle.eps_unit)


class OutOfBox(DLA):
    def attack(self, oracle) -> None:
        oracle.query(oracle.clean - 1e-3)  # inside the ball, below 0 at the black pixel


@pytest.mark.parametrize("cls", [OutOfBall, OutOfBox])
def test_oracle_refuses_candidates_outside_the_ball_or_box(cls) -> None:
    images = torch.full((1, 3, 4, 4), 0.5)
    images[..., 0, 0] = 0.0
    model = TinySegmenter()
    with pytest.raises(SegtkError, match="outside the ε-ball or \\[0,1\\]"):
        cls(budget=3, eps=8).run(model, images, torch.zeros(1, 4, 4, dtype=torch.long))
    assert model.calls == 0  # refused before the model saw it

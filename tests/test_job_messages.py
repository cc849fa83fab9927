"""The jobs' small readers and messages pinned exactly: --size and --scale, what a diverged
training says, what an edit run's config records about its captioner and prompt writer, the
error of an edit run that made no edit, and its summary table."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from segtk.core import SegtkError
from segtk.jobs.edit import EditSummary, captioner_settings, no_edits, prompt_settings
from segtk.jobs.edit_records import EditLine, SkipLine
from segtk.jobs.train import diverged_hint
from segtk.jobs.train_samples import parse_scale, parse_size

Refuse = Callable[..., tuple[str, str | None]]  # the `refusal` fixture (conftest.py)


def test_size_is_width_x_height_of_at_least_8(refusal: Refuse) -> None:
    assert parse_size(None, "--size") is None and parse_size("", "--crop") is None
    assert parse_size("240x180", "--size") == (240, 180)
    assert parse_size("8X8", "--crop") == (8, 8)
    for bad in ("240", "7x180", "240x7", "x", "240x", "-8x8", "8x8x8", "2.5x9"):
        assert refusal(lambda bad=bad: parse_size(bad, "--crop")) == (
            f"--crop {bad!r} is not WIDTHxHEIGHT (both >= 8)", "e.g. --crop 240x180")


def test_scale_is_lo_hi_within_0_and_16(refusal: Refuse) -> None:
    assert parse_scale(None) is None and parse_scale("") is None
    assert parse_scale("0.5,2.0") == (0.5, 2.0)
    assert parse_scale("1,1") == (1.0, 1.0) and parse_scale("0.01,16") == (0.01, 16.0)
    for bad in ("0,2", "2,1", "0.5,16.5", "0.5", "0.5,1,2", "a,b", "nan,1", "-1,2"):
        assert refusal(lambda bad=bad: parse_scale(bad)) == (
            f"--scale {bad!r} is not LO,HI with 0 < LO <= HI <= 16",
            "e.g. --scale 0.5,2.0 (MMSegmentation's ratio range)")


def test_a_diverged_training_names_the_cause() -> None:
    assert diverged_hint("epoch-0003", True, True) == (
        "the weights of epoch-0003 give it: delete that checkpoint and rerun with --resume (its "
        "epoch is trained again)")
    assert diverged_hint("demo", True, False) == "demo gives it: check that model, or train from another one"
    for fresh, checkpoint in ((False, True), (False, False)):
        assert diverged_hint("epoch 2", fresh, checkpoint) == (
            "training diverged after epoch 2: rerun with a lower --lr into another --out (a "
            "--resume keeps the run's --lr)")


def test_an_edit_runs_config_records_its_captioner_and_prompt_writer_only_when_set(refusal: Refuse) -> None:
    assert captioner_settings(None, ["a=1"]) == {}
    assert captioner_settings("blip") == {"captioner": "blip", "captioner_params": {}}
    assert captioner_settings("blip", [" model = m ", "beams=3"]) == {
        "captioner": "blip", "captioner_params": {"model": "m", "beams": "3"}}
    assert refusal(lambda: captioner_settings("blip", ["beams"])) == (
        "cannot read --captioner-param 'beams': expected KEY=VALUE", "write --captioner-param KEY=VALUE")
    assert prompt_settings("lm", None) == {}
    assert prompt_settings(None, "models/chat") == {"prompt_model": "models/chat"}
    assert prompt_settings("lm", "m") == {"prompt_model": "m"}  # the default writer: not recorded
    assert prompt_settings("upper", "m") == {"prompt_model": "m", "prompt_writer": "upper"}


def skip(source: str, reason: str, detail: str = "") -> SkipLine:
    return SkipLine(name=f"{source}__x", source=source, value="x", reason=reason, detail=detail)


def test_an_edit_run_without_edits_says_how_many_why_and_what_to_change(tmp_path: Path) -> None:
    summary = EditSummary(planned=4, skipped=[
        skip("a", "no-room", "the moved object box leaves the image"), skip("a", "no-room"),
        skip("b", "tiny-object"), skip("c", "filtered:clip")])
    error = no_edits(summary, tmp_path)
    assert str(error.args[0]) == ("no edit made: all 4 planned edits of 3 images were skipped "
                                  "(1 filtered:clip, 2 no-room, 1 tiny-object)")
    assert error.hint == "; ".join([
        f"{tmp_path / 'skipped.jsonl'} says why for each image (e.g. a: the moved object box "
        "leaves the image)",
        "choose smaller --values",  # in the order the reasons first appear
        "allow other or smaller objects (--classes, --exclude, --min-area)",
        "loosen the filters (--filter-param) or drop one (--filter)"])
    plain = no_edits(EditSummary(planned=1, skipped=[skip("d", "bad-data")]), tmp_path)
    assert plain.hint == (f"{tmp_path / 'skipped.jsonl'} says why for each image (e.g. d: bad-data); "
                          "fix the labels (ids must be classes of the dataset or its ignore index)")
    nothing = no_edits(EditSummary(), tmp_path)
    assert str(nothing.args[0]) == ("no edit made: all 0 planned edits of 0 images were skipped "
                                    "(nothing planned)")
    assert nothing.hint == f"{tmp_path / 'skipped.jsonl'} says why for each image"
    odd = no_edits(EditSummary(planned=1, skipped=[skip("e", "surprise")]), tmp_path)
    assert odd.hint == f"{tmp_path / 'skipped.jsonl'} says why for each image (e.g. e: surprise)"


def test_the_edit_summary_table_counts_edits_and_source_images_per_reason() -> None:
    made = [EditLine(name=f"{s}__x{i}", source=s, value="x", class_name="car")
            for i, s in enumerate(("a", "a", "b"))]
    summary = EditSummary(planned=7, edited=made, skipped=[
        skip("c", "no-room"), skip("c", "no-room"), skip("d", "no-room"), skip("a", "bad-mask")])
    assert summary.table() == [("edited", 3, 2),
                               ("skipped: bad-mask", 1, 1), ("skipped: no-room", 3, 2)]


# --- segtk predict's job ----------------------------------------------------------------------


def test_predict_writes_what_it_scores_in_any_batching(tmp_path: Path, folder_dataset: Path) -> None:
    """Label PNGs hold the predicted ids in the dataset's palette (the default one when the
    dataset has none), overlays mark ignored pixels as the dataset's ignore index says, the
    summary names the model and data, and batching changes nothing."""
    import json

    import numpy as np
    from PIL import Image

    from segtk.core import load_dataset
    from segtk.core._data import default_palette
    from segtk.imaging import overlay
    from segtk.jobs.predict import predict_dataset
    from segtk.testing import TinySegmenter

    data = load_dataset(f"folder:{folder_dataset}")
    model = TinySegmenter()
    seen: list[int] = []
    summary = predict_dataset(model, data, tmp_path / "a", on_batch=seen.append)
    assert seen == [len(data)] and set(summary) == {"model", "dataset", "images", "miou", "pacc", "iou"}
    assert (summary["model"], summary["dataset"], summary["images"]) == (model.name, data.name, len(data))
    assert list(summary["iou"]) == list(data.classes)
    assert json.loads((tmp_path / "a" / "summary.json").read_text()) == json.loads(json.dumps(summary))
    palette = data.palette if data.palette is not None else default_palette(len(data.classes))
    for i in range(len(data)):
        item = data[i]
        pred = model.predict(torch.from_numpy(item.image).permute(2, 0, 1)[None].float() / 255)[0]
        png = Image.open(tmp_path / "a" / "labels" / f"{item.name}.png")
        assert np.array_equal(np.asarray(png), pred.numpy())
        written = png.getpalette()
        assert written is not None
        assert written[:3 * len(palette)] == [int(v) for v in np.asarray(palette).ravel()]
        shown = np.asarray(Image.open(tmp_path / "a" / "overlays" / f"{item.name}.png").convert("RGB"))
        assert np.array_equal(shown, overlay(item.image, pred.numpy(), palette,
                                             ignore_index=data.ignore_index))
    one = predict_dataset(model, data, tmp_path / "b", batch_size=1)
    assert one == summary
    for folder in ("labels", "overlays"):
        for f in sorted((tmp_path / "a" / folder).iterdir()):
            assert f.read_bytes() == (tmp_path / "b" / folder / f.name).read_bytes()


def test_a_model_that_raises_is_named_with_the_first_image_of_its_batch(folder_dataset: Path) -> None:
    from segtk.core import ModelError, load_dataset
    from segtk.jobs.predict import predict_dataset
    from segtk.testing import TinySegmenter

    class Broken(TinySegmenter):
        def predict(self, images: torch.Tensor) -> torch.Tensor:
            raise RuntimeError("boom")

    data = load_dataset(f"folder:{folder_dataset}")
    with pytest.raises(ModelError) as info:
        predict_dataset(Broken(), data, None, batch_size=2)
    assert str(info.value.args[0]) == f"while predicting {data[0].name}: the model raised RuntimeError: boom"


def test_predict_refuses_other_class_names_unless_told_to_trust_the_data(folder_dataset: Path) -> None:
    from segtk.core import load_dataset
    from segtk.jobs.predict import predict_dataset
    from segtk.testing import TinySegmenter

    class Renamed(TinySegmenter):
        def __init__(self) -> None:
            super().__init__()
            self.classes = [f"other {c}" for c in self.classes]

    data = load_dataset(f"folder:{folder_dataset}")
    with pytest.raises(SegtkError) as info:
        predict_dataset(Renamed(), data, None)
    assert "name their classes differently" in str(info.value.args[0])
    assert predict_dataset(Renamed(), data, None, classes_from_data=True)["images"] == len(data)


def test_a_missing_model_spec_and_a_damaged_checkpoint_say_what_to_do(tmp_path: Path, refusal: Refuse) -> None:
    from segtk.jobs.checkpoints import damaged
    from segtk.jobs.train import read_spec

    assert refusal(lambda: read_spec(tmp_path)) == (
        f"{tmp_path / 'model.spec'}: not found", "the training run has not finished an epoch")
    epoch = tmp_path / "checkpoints" / "epoch-0002"
    hint = (f"delete {epoch} and rerun with --resume: that epoch is trained again (or restore the "
            "folder from a backup)")
    for path in (epoch / "state.pt", epoch / "model" / "model.safetensors"):
        error = damaged(path, "is truncated")
        assert (str(error.args[0]), error.hint) == (f"{path} is truncated: the checkpoint is damaged", hint)

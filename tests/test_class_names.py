"""Class names are checked, not counted: a model whose names differ from the dataset's (same
count, two swapped) is refused by every command that scores it, before anything is written;
`--classes-from-data` and `classes=` in the model spec are the explicit ways out."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import segtk_demo
from segtk.class_names import check_compatible, class_key
from segtk.cli import cli
from segtk.core import DataError, Dataset, ModelError
from segtk.core._specs import load_dataset, load_segmenter, pop_classes
from segtk.testing import TinySegmenter, shared

DEMO_DATA = Path(segtk_demo.__file__).parent / "data"
DEMO_CLASSES = ["sky", "road", "sidewalk", "building", "vegetation", "car", "person", "pole"]
SWAPPED = ["sky", "road", "sidewalk", "building", "vegetation", "car", "pole", "person"]


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.fixture(scope="module")
def swapped_data(tmp_path_factory) -> str:
    """Two demo scenes whose classes.txt swaps person and pole: the demo model's names, with
    two of them in the other order."""
    root = tmp_path_factory.mktemp("swapped")
    for sub in ("images", "labels"):
        (root / sub).mkdir()
        for name in ("scene_000.png", "scene_001.png"):
            shutil.copy(DEMO_DATA / sub / name, root / sub / name)
    (root / "classes.txt").write_text("\n".join(SWAPPED) + "\n")
    return f"folder:{root}"


# one fast run of each command that scores a model on data; OUT and DATA/MODEL filled in
COMMANDS = {
    "predict": ["predict"],
    "attack": ["attack", "--plugin", "random", "--budget", "2", "--no-save-images"],
    "bench attacks": ["bench", "attacks", "--attacks", "random", "--budgets", "2", "--repeats", "1",
                      "--executor", "inline"],
    "bench edits": ["bench", "edits", "--attributes", "color", "--values", "color=red",
                    "--executor", "inline"],
    "train": ["train", "--split", "", "--epochs", "1", "--batch-size", "2", "--crop", "64x48"],
    "bench augment": ["bench", "augment", "--split", "", "--eval-split", "", "--augment", "baseline",
                      "--attributes", "color", "--values", "color=red", "--epochs", "1",
                      "--batch-size", "2", "--crop", "64x48"],
}
RUN_JSON = [c for c in COMMANDS if c != "predict"]  # the commands that write OUT/run.json


def run(command: str, model: str, data: str, out: Path, *extra: str):
    model_flag = "--models" if command == "bench edits" else "--model"
    return invoke(*COMMANDS[command], model_flag, model, "--data", data, "--out", str(out), *extra)


@pytest.mark.parametrize("command", COMMANDS)
def test_swapped_names_are_refused_before_anything_is_written(command, swapped_data, tmp_path) -> None:
    out = tmp_path / "out"
    result = run(command, "demo", swapped_data, out)
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert "name their classes differently, first at index 6: model 'person', dataset 'pole'" in text
    assert f"model: {';'.join(DEMO_CLASSES)}; dataset: {';'.join(SWAPPED)}" in text
    assert "--classes-from-data" in text and "classes=a;b;c" in text
    assert "Traceback" not in result.output
    assert not out.exists()


def test_bench_attacks_checks_every_model(swapped_data, tmp_path) -> None:
    renamed = f"demo:classes={';'.join(SWAPPED)}"
    result = run("bench attacks", renamed, swapped_data, tmp_path / "out", "--model", "demo")
    assert result.exit_code == 1 and "model 'person', dataset 'pole'" in result.output


@pytest.mark.parametrize("command", COMMANDS)
def test_classes_from_data_accepts_them_and_is_recorded(command, swapped_data, tmp_path) -> None:
    out = tmp_path / "out"
    result = run(command, "demo", swapped_data, out, "--classes-from-data")
    assert result.exit_code == 0, result.output
    if command in RUN_JSON:
        assert json.loads((out / "run.json").read_text())["config"]["classes_from_data"] is True


@pytest.mark.parametrize("command", COMMANDS)
def test_classes_in_the_spec_name_the_outputs(command, swapped_data, tmp_path) -> None:
    out = tmp_path / "out"
    result = run(command, f"demo:classes={';'.join(SWAPPED)}", swapped_data, out)
    assert result.exit_code == 0, result.output
    if command in RUN_JSON:  # recorded only when set: older run directories still resume
        assert "classes_from_data" not in json.loads((out / "run.json").read_text())["config"]


def test_a_trained_model_keeps_the_classes_of_its_spec(swapped_data, tmp_path) -> None:
    out = tmp_path / "t"
    assert run("train", f"demo:classes={';'.join(SWAPPED)}", swapped_data, out).exit_code == 0
    predicted = invoke("predict", "--model", str(out / "model.spec"), "--data", swapped_data)
    assert predicted.exit_code == 0, predicted.output


def dataset(classes: list[str]) -> Dataset:
    return Dataset("d", classes, [])


def model(classes: list[str]) -> TinySegmenter:
    m = TinySegmenter(len(classes))
    m.classes = classes
    return m


@pytest.mark.parametrize("model_names,data_names", [
    (["Sky", "Traffic_Light", "sign-symbol"], ["sky", "traffic light", "signsymbol"]),
    (["Pedestrian", "road "], ["pedestrian", "Road"]),
])
def test_names_match_whatever_the_case_and_separators(model_names, data_names) -> None:
    check_compatible(model(model_names), dataset(data_names))
    assert [class_key(n) for n in model_names] == [class_key(n) for n in data_names]


@pytest.mark.parametrize("model_names,data_names,index", [
    (["a", "b", "c"], ["a", "c", "b"], 1),
    (["road", "car"], ["road", "cars"], 1),
    (["person", "x"], ["pole", "x"], 0),
])
def test_the_first_difference_is_named(model_names, data_names, index) -> None:
    with pytest.raises(DataError, match=rf"first at index {index}: model '{model_names[index]}', "
                                        rf"dataset '{data_names[index]}'"):
        check_compatible(model(model_names), dataset(data_names))
    check_compatible(model(model_names), dataset(data_names), classes_from_data=True)


def test_counts_are_refused_even_with_classes_from_data() -> None:
    with pytest.raises(DataError, match="predicts 2 classes but dataset d has 3"):
        check_compatible(model(["a", "b"]), dataset(["a", "b", "c"]), classes_from_data=True)


def test_classes_option_of_the_spec() -> None:
    assert pop_classes("camvid=W.safetensors,classes=a;b") == ("camvid=W.safetensors", ["a", "b"])
    assert pop_classes("classes=a; b ;c") == ("", ["a", "b", "c"])
    assert pop_classes("W.safetensors") == ("W.safetensors", None)
    with pytest.raises(ModelError, match="given twice"):
        pop_classes("classes=a,classes=b")
    with pytest.raises(ModelError, match="names no class"):
        pop_classes("classes=")
    with pytest.raises(ModelError, match="classes= names 2 classes but the model predicts 8"):
        load_segmenter("demo:classes=a;b")
    assert load_segmenter(f"demo:classes={';'.join(SWAPPED)}").classes == SWAPPED
    assert load_segmenter("demo").classes == DEMO_CLASSES  # a fresh model keeps its own names


def test_espnet_camvid_keeps_working_on_camvid() -> None:
    """11 named classes and a 12th "void" output: the names match the dataset's."""
    weights = shared("models/espnet_camvid.safetensors")
    data = load_dataset(f"camvid:{shared('data/camvid')}", limit=1)
    check_compatible(load_segmenter(f"espnet:camvid={weights}"), data)

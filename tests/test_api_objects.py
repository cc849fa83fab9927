"""The Python API meets a user's habits: eps on the [0,1] scale is refused with the value to
pass, a plain torch module is a model (`segtk.wrap` or keywords), tensors, pairs and
DataLoaders are data, `segtk.attack_tensors` gives tensors and `segtk.attack`'s numbers, a
clean mIoU too low to mean anything is said once, results are in % with a short repr."""

from __future__ import annotations

import types
import warnings

import numpy as np
import pytest
import torch
from click.testing import CliRunner

import segtk
from segtk.cli import cli
from segtk.core import (
    Segmenter,
    SegmenterPlugin,
    SegtkError,
    hookimpl,
    read_label,
    registry,
    write_png,
)
from segtk.core._eps import check_eps
from segtk.core._plugins import get_plugin_manager, reset_plugin_manager
from segtk.testing import TinySegmenter
from segtk_demo.model import load_net
from segtk_demo.scenes import CLASSES

EPS_MESSAGE = ("eps=0.0314 looks like a fraction of the [0,1] range; segtk takes eps on the "
               "0-255 scale: pass eps=8 for 8/255")


@pytest.fixture(scope="module")
def demo_tensors() -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    data = segtk.load_dataset("demo", limit=2)
    items = list(data)
    images = torch.stack([torch.from_numpy(i.image).permute(2, 0, 1) for i in items]).float() / 255
    labels = torch.stack([torch.from_numpy(i.label) for i in items])
    return images, labels, data.names


class Constant(Segmenter):
    """Predicts one class everywhere: a model whose clean mIoU means nothing."""

    name = "constant"
    classes = list(CLASSES)

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        return torch.full((images.shape[0], *images.shape[2:]), 6, dtype=torch.long)


# --- eps ------------------------------------------------------------------------------------


def test_check_eps_refuses_the_unit_scale_naming_the_value_to_pass() -> None:
    with pytest.raises(SegtkError) as err:
        check_eps(0.0314)
    assert err.value.message == EPS_MESSAGE
    assert check_eps(8) == 8.0 and check_eps(1) == 1.0 and check_eps(255) == 255.0
    for bad in (0, -1, 256):
        with pytest.raises(SegtkError, match=r"must be in \(0, 255\]"):
            check_eps(bad)


@pytest.mark.parametrize("call", [
    lambda: segtk.attack("demo", "demo", "dla", budget=5, eps=0.0314, limit=1),
    lambda: segtk.bench_attacks("demo", "demo", attacks="random", budgets=[5], eps=[8, 0.0314],
                                repeats=1, limit=1),
    lambda: segtk.attack("demo", "demo", "dla", budget=5, eps=0.0314, limit=1, out="unused"),
])
def test_every_api_function_refuses_eps_on_the_unit_scale(call, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SegtkError) as err:
        call()
    assert err.value.message == EPS_MESSAGE
    assert list(tmp_path.iterdir()) == [], "refused before anything is written"


def test_the_cli_refuses_eps_on_the_unit_scale_with_the_same_rule(tmp_path) -> None:
    result = CliRunner().invoke(cli, ["attack", "--plugin", "dla", "--budget", "5", "--limit",
                                      "1", "--eps", "0.0314", "--out", str(tmp_path / "a")])
    assert result.exit_code == 2
    assert EPS_MESSAGE.replace("eps=", "--eps=").replace(" eps ", " --eps ") in \
        " ".join(result.output.split())


# --- models ----------------------------------------------------------------------------------


def test_a_module_without_classes_is_refused_in_one_line() -> None:
    for call in (lambda: segtk.load_model(load_net()),
                 lambda: segtk.attack(load_net(), "demo", budget=5, limit=1),
                 lambda: segtk.predict(load_net(), "demo", limit=1)):
        with pytest.raises(SegtkError) as err:
            call()
        assert "without classes=" in err.value.message and "segtk.wrap(net" in (err.value.hint or "")
        assert "\n" not in str(err.value)


def test_keywords_with_a_spec_are_refused() -> None:
    with pytest.raises(SegtkError, match="describes a torch.nn.Module"):
        segtk.attack("demo", "demo", budget=5, limit=1, classes=list(CLASSES))


def test_a_wrapped_module_gives_the_plugins_numbers_black_and_white_box() -> None:
    """The demo network wrapped by hand is the demo model: the same records for a
    decision-based attack; a white-box one runs on it (the wrapper has logits and gradients)
    and lands where the plugin's does (the plugin runs one image per forward, the wrapper a
    batch: gradients differ in the last bits)."""
    wrapped = segtk.wrap(load_net(), classes=list(CLASSES), name="demo")
    assert wrapped.has_gradients
    mine = segtk.attack(load_net(), "demo", "dla", budget=5, limit=2, classes=list(CLASSES))
    plugin = segtk.attack("demo", "demo", "dla", budget=5, limit=2)
    assert [r.to_json() for r in mine.records] == [r.to_json() for r in plugin.records]
    mine = segtk.attack(wrapped, "demo", "pgd", budget=5, limit=2)
    plugin = segtk.attack("demo", "demo", "pgd", budget=5, limit=2)
    assert mine.clean_miou == plugin.clean_miou
    assert mine.adv_miou == pytest.approx(plugin.adv_miou, abs=0.5)
    assert mine.adv_miou < mine.clean_miou - 20
    assert segtk.load_model(wrapped) is wrapped
    assert segtk.predict(wrapped, "demo", limit=2) == segtk.predict("demo", "demo", limit=2)


def test_wrap_normalises_and_resizes() -> None:
    """mean/std and size reach the module; logits at another size come back at the image's."""
    seen: list[torch.Tensor] = []

    class Probe(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            seen.append(x)
            return torch.zeros(x.shape[0], 2, x.shape[2] // 2, x.shape[3] // 2)

    model = segtk.wrap(Probe(), ["a", "b"], mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25),
                       size=(32, 16))
    labels = model.predict(torch.ones(1, 3, 10, 20))
    assert labels.shape == (1, 10, 20) and labels.dtype == torch.int64
    assert seen[0].shape == (1, 3, 16, 32) and torch.allclose(seen[0], torch.full_like(seen[0], 2.0))
    padded = segtk.wrap(Probe(), ["a", "b"], resize="pad", multiple=8)
    assert padded.logits(torch.ones(1, 3, 10, 20)).shape == (1, 2, 10, 20)
    assert seen[-1].shape == (1, 3, 16, 24)


def test_a_model_returning_float_labels_is_refused(demo_tensors) -> None:
    class Floats(Constant):
        def predict(self, images: torch.Tensor) -> torch.Tensor:
            return super().predict(images).float()

    images, labels, _ = demo_tensors
    with pytest.raises(SegtkError, match="returned labels of type torch.float32"):
        segtk.attack(Floats(), (images, labels), budget=5)


# --- data ------------------------------------------------------------------------------------


def test_tensors_pairs_and_a_dataloader_are_data(demo_tensors) -> None:
    from torch.utils.data import DataLoader, TensorDataset

    images, labels, names = demo_tensors
    spec = segtk.attack("demo", "demo", "dla", budget=10, limit=2)
    runs = [segtk.attack("demo", data, "dla", budget=10)
            for data in ((images, labels), list(zip(images, labels, strict=True)),
                         DataLoader(TensorDataset(images, labels), batch_size=1))]
    assert all(run.summary == runs[0].summary for run in runs)
    assert [r.image for r in runs[0].records] == ["00000", "00001"]
    # the same images under other names: other random streams, the same clean scores
    assert runs[0].clean_miou == spec.clean_miou


@pytest.mark.parametrize("change,says", [
    (lambda x, y: (x * 2, y), "outside [0,1]"),
    (lambda x, y: (x, y.float()), "not integer class ids"),
    (lambda x, y: (x, y + 20), "outside the model's 8 classes"),
    (lambda x, y: (x, y[:, :5]), "labels have shape"),
    (lambda x, y: (x[:, :1], y), "expected [B,3,H,W]"),
])
def test_bad_tensors_are_refused_in_one_line(demo_tensors, change, says) -> None:
    images, labels, _ = demo_tensors
    with pytest.raises(SegtkError) as err:
        segtk.attack("demo", change(images, labels), budget=5)
    assert says in err.value.message and "\n" not in str(err.value)


# --- tensors in, tensors out -----------------------------------------------------------------


def test_attack_tensors_gives_segtk_attacks_numbers(demo_tensors) -> None:
    images, labels, names = demo_tensors
    adv, run = segtk.attack_tensors("demo", images, labels, attack="colour-blocks", budget=20,
                                    eps=8, names=names)
    same = segtk.attack("demo", "demo", "colour-blocks", budget=20, eps=8, limit=2)
    assert [r.to_json() for r in run.records] == [r.to_json() for r in same.records]
    assert run.summary == same.summary
    assert adv.dtype == torch.float32 and adv.shape == images.shape
    assert 0 <= float(adv.min()) and float(adv.max()) <= 1
    assert float((adv - images).abs().max()) * 255 <= 8 + 1e-4
    assert float((adv - images).abs().max()) > 0, "the attack changed something"
    for name, image in zip(names, adv, strict=True):
        stored = same.images[name]
        assert np.array_equal((image * 255).round().byte().permute(1, 2, 0).numpy(), stored)


# --- sanity ----------------------------------------------------------------------------------


def test_a_clean_miou_under_5_percent_warns_once(demo_tensors) -> None:
    images, labels, _ = demo_tensors
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        segtk.attack(Constant(), (images, labels), "random", budget=3)
    said = [str(w.message) for w in caught if "clean mIoU" in str(w.message)]
    assert len(said) == 1 and "preprocessing" in said[0] and "class order" in said[0]
    assert caught[0].filename == __file__, "the warning points at the user's call"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        segtk.attack("demo", "demo", "random", budget=3, limit=2)
    assert not [w for w in caught if "clean mIoU" in str(w.message)]


def test_bench_attacks_warns_about_a_low_clean_miou(demo_tensors) -> None:
    images, labels, _ = demo_tensors
    said: list[str] = []
    segtk.bench_attacks(Constant(), (images, labels), attacks="random", budgets=[3], repeats=1,
                        warn=said.append)
    assert len(said) == 1 and "model constant scores a clean mIoU of" in said[0]


# --- benchmarks with objects -----------------------------------------------------------------


def test_bench_attacks_takes_model_and_data_objects_in_process() -> None:
    by_spec = segtk.bench_attacks("demo", "demo", attacks="random,pgd", budgets=[5], repeats=1,
                                  limit=2)
    mine = segtk.bench_attacks(load_net(), segtk.load_dataset("demo", limit=2),
                               attacks="random,pgd", budgets=[5], repeats=1,
                               classes=list(CLASSES))
    assert [r["model"] for r in mine] == ["python:DemoNet"] * 3
    assert [(r["attack"], r["miou_mean"]) for r in mine][:2] == \
        [(r["attack"], r["miou_mean"]) for r in by_spec][:2]
    # white-box: the wrapper's batched gradients differ from the plugin's in the last bits,
    # so the pgd row is the wrapper's own attack
    pgd = segtk.attack(load_net(), "demo", "pgd", budget=5, limit=2, classes=list(CLASSES))
    assert mine[2]["attack"] == "pgd" and mine[2]["miou_mean"] == pytest.approx(pgd.adv_miou)
    with pytest.raises(SegtkError, match="cannot be sent to the workers"):
        segtk.bench_attacks(load_net(), "demo", attacks="random", budgets=[5], repeats=1,
                            limit=2, workers=2, classes=list(CLASSES))


def test_bench_edits_takes_a_module(tmp_path) -> None:
    by_spec = segtk.bench_edits("demo", "demo", "color", {"color": ["red"]}, tmp_path / "spec",
                                limit=2)
    mine = segtk.bench_edits(segtk.wrap(load_net(), list(CLASSES)), "demo", "color",
                             {"color": ["red"]}, tmp_path / "mine", limit=2)
    assert [r["model"] for r in mine] == ["python:DemoNet"] * 2
    assert [(r["subset"], r["miou"]) for r in mine] == [(r["subset"], r["miou"]) for r in by_spec]


def test_a_python_object_spec_is_refused_outside_its_process() -> None:
    with pytest.raises(SegtkError, match="a Python object of the process"):
        segtk.load_model("python:DemoNet")


# --- units and repr --------------------------------------------------------------------------


def test_results_are_in_percent_with_a_short_repr(tmp_path) -> None:
    run = segtk.attack("demo", "demo", "dla", budget=10, limit=2)
    table = segtk.bench_attacks("demo", "demo", attacks="dla", budgets=[10], repeats=1, limit=2)
    assert run.clean_miou == pytest.approx(table[0]["miou_mean"])  # one unit: %
    assert 50 < run.clean_miou <= 100
    assert run.records[0].clean_miou <= 1, "records are results.jsonl's lines (fractions)"
    assert len(repr(run)) < 200 and "clean_miou=" in repr(run) and "%" in repr(run)
    assert len(repr(table)) < 300 and repr(table).startswith("Table(2 rows")


@pytest.fixture
def tiny_model():
    """`--model tiny` through the plugin manager (as in test_cli.py)."""
    reset_plugin_manager()
    plugin = types.SimpleNamespace(register_models=hookimpl(lambda register: register(
        SegmenterPlugin("tiny", lambda arg: TinySegmenter(), "tiny", "--model tiny"))))
    get_plugin_manager().register(plugin, name="tiny-api-objects")
    registry.reset()
    yield "tiny"
    reset_plugin_manager()
    registry.reset()


def test_the_cli_warns_about_a_low_clean_miou(tmp_path, folder_dataset, tiny_model) -> None:
    """Labels one class off what the model predicts (a class order mix-up): `segtk attack`
    and `segtk bench attacks` say so once, and still run."""
    for path in (folder_dataset / "labels").iterdir():
        label = read_label(path)
        write_png(path, np.where(label == 255, 255, (label + 1) % 4).astype(np.uint8))
    for args in (["attack", "--plugin", "random", "--budget", "2", "--out", str(tmp_path / "a")],
                 ["bench", "attacks", "--attacks", "random", "--budgets", "2", "--repeats", "1",
                  "--executor", "inline", "--out", str(tmp_path / "b")]):
        result = CliRunner().invoke(cli, [*args, "--model", "tiny", "--data",
                                          f"folder:{folder_dataset}"])
        assert result.exit_code == 0, result.output
        said = " ".join(result.output.split())
        assert said.count("warning: model tiny scores a clean mIoU of 0.00%") == 1, said

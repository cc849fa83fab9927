"""detectron2 adapter without detectron2: spec parsing, input packing, outputs -> labels with a
fake model, and the registry reporting the missing dependency with install instructions.

Nothing here pretends detectron2 ran: `load` itself needs the library and is only checked to
refuse cleanly when it is absent.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from click.testing import CliRunner

from segtk.cli import cli
from segtk.core import ModelError, PluginError, load_segmenter
from segtk_detectron2.segmenter import (
    Detectron2Segmenter,
    pack_inputs,
    parse,
    resize_shortest_edge,
    run_hooks,
)

HAVE_D2 = importlib.util.find_spec("detectron2") is not None


def test_parse_spec() -> None:
    spec = parse("configs/a.yaml,w/model_final.pkl,classes=sky;road,"
                 "add_config=mask_former:add_mask_former_config;cat_seg:add_cat_seg_config,"
                 "dataset=ade20k_sem_seg_val,opts=MODEL.SEM_SEG_HEAD.NUM_CLASSES=2;INPUT.FORMAT=RGB")
    assert spec.config == Path("configs/a.yaml") and spec.weights == "w/model_final.pkl"
    assert spec.classes == ["sky", "road"] and spec.dataset == "ade20k_sem_seg_val"
    assert spec.add_config == ["mask_former:add_mask_former_config", "cat_seg:add_cat_seg_config"]
    assert spec.opts == ["MODEL.SEM_SEG_HEAD.NUM_CLASSES", "2", "INPUT.FORMAT", "RGB"]
    for bad, match in [("a.yaml", "config file and a weights file"),
                       ("a.yaml,classes=a", "config file and a weights file"),
                       ("a.yaml,w.pth,colour=red", "unknown detectron2 option"),
                       ("a.yaml,w.pth,add_config=nofunction", "module:function"),
                       ("a.yaml,w.pth,opts=MODEL.X", "KEY=VALUE")]:
        with pytest.raises(ModelError, match=match):
            parse(bad)


def test_parse_open_vocabulary_spec() -> None:
    spec = parse("a.yaml,w.pth,vocab=red car; sky ;road,add_config=m:f")
    assert spec.vocab == ["red car", "sky", "road"] and spec.classes is None
    for bad, match in [("a.yaml,w.pth,vocab=;", "names no class"),
                       ("a.yaml,w.pth,vocab=a;b,classes=a;b", "without classes= or dataset="),
                       ("a.yaml,w.pth,vocab=a,dataset=ade20k_sem_seg_val", "without classes=")]:
        with pytest.raises(ModelError, match=match):
            parse(bad)


def test_bench_edits_models_keep_a_specs_own_commas() -> None:
    """`segtk bench edits --models A,B` with detectron2/mmseg specs, which contain commas."""
    from segtk.commands.bench_edits import split_models

    d2 = "detectron2:a.yaml,w.pth,classes=a;b,add_config=m.n:f,opts=MODEL.X=1;INPUT.FORMAT=RGB"
    mm = "mmseg:c.py,k.pth,trust"
    assert split_models(f"{d2},demo, {mm}") == [d2, "demo", mm]
    assert split_models("demo,demo:fresh=2") == ["demo", "demo:fresh=2"]


def test_resize_shortest_edge_matches_detectron2_rules() -> None:
    assert resize_shortest_edge(480, 640, 0, 0) == (480, 640)  # MIN_SIZE_TEST 0: no resize
    assert resize_shortest_edge(480, 640, 512, 2048) == (512, 683)
    assert resize_shortest_edge(640, 480, 512, 2048) == (683, 512)
    assert resize_shortest_edge(100, 1000, 512, 2048) == (205, 2048)  # capped by MAX_SIZE_TEST


def test_pack_inputs_channel_order_scale_and_size() -> None:
    x = torch.rand(2, 3, 10, 20)
    bgr = pack_inputs(x, "BGR")
    assert [set(d) for d in bgr] == [{"image", "height", "width"}] * 2
    assert bgr[0]["height"] == 10 and bgr[0]["width"] == 20
    assert torch.equal(bgr[1]["image"], x[1].flip(0) * 255)  # float, not rounded to uint8
    assert torch.equal(pack_inputs(x, "RGB")[0]["image"], x[0] * 255)
    resized = pack_inputs(x, "RGB", min_size=20, max_size=100)
    assert resized[0]["image"].shape == (3, 20, 40) and resized[0]["height"] == 10
    with pytest.raises(ModelError, match="not supported"):
        pack_inputs(x, "YUV")


class FakeModel:
    """Behaves like a detectron2 semantic model: normalises, runs, resizes sem_seg back."""

    def __init__(self, classes: int = 4) -> None:
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, classes, 3, padding=1)
        self.mean = torch.tensor([103.5, 116.3, 123.7]).view(3, 1, 1)
        self.calls: list[list[tuple]] = []

    def __call__(self, batched):
        self.calls.append([tuple(d["image"].shape) for d in batched])
        out = []
        for d in batched:
            sem = self.conv(((d["image"] - self.mean) / 58.0)[None])
            sem = F.interpolate(sem, size=(d["height"], d["width"]), mode="bilinear")[0]
            out.append({"sem_seg": sem.softmax(0)})
        return out


def test_outputs_to_labels_with_a_fake_model() -> None:
    fake = FakeModel()
    model = Detectron2Segmenter(fake, ["a", "b", "c", "d"], "detectron2:fake", "BGR", 16, 64)
    x = torch.rand(3, 3, 12, 18)
    labels = model.predict(x)
    assert labels.shape == (3, 12, 18) and labels.dtype == torch.int64
    assert fake.calls[-1] == [(3, 16, 24)] * 3  # one batched call, resized short edge 16
    assert model.logits(x).shape == (3, 4, 12, 18)
    assert torch.equal(torch.cat([model.predict(x[i:i + 1]) for i in range(3)]), labels)
    with torch.no_grad():
        expected = fake(pack_inputs(x, "BGR", 16, 64))
    assert torch.equal(labels, torch.stack([o["sem_seg"] for o in expected]).argmax(1))
    assert model.predict(torch.rand(0, 3, 5, 5)).shape == (0, 5, 5)


def test_bad_outputs_and_class_lists_are_clear_errors() -> None:
    x = torch.rand(1, 3, 4, 4)
    for outputs, match in [([{"instances": 1}], "no sem_seg"), ([], "expected 1 dicts"),
                           ([{"sem_seg": torch.rand(4, 4)}], "no sem_seg")]:
        with pytest.raises(ModelError, match=match):
            Detectron2Segmenter(lambda _b, o=outputs: o, ["a"], "d2").predict(x)
    with pytest.raises(ModelError, match="returned 4 score channels but 3 classes are named"):
        Detectron2Segmenter(FakeModel(4), ["a", "b", "c"], "d2").predict(x)
    nan = [{"sem_seg": torch.full((2, 4, 4), float("nan"))}]
    with pytest.raises(ModelError, match="NaN"):
        Detectron2Segmenter(lambda _b: nan, ["a", "b"], "d2").predict(x)
    with pytest.raises(ModelError, match="no class list"):
        Detectron2Segmenter(FakeModel(), [], "d2")
    with pytest.raises(ModelError, match="predicts 4 classes but 2 are named"):
        Detectron2Segmenter(FakeModel(), ["a", "b"], "d2", num_outputs=4)


def test_add_config_hooks_are_called_in_order() -> None:
    cfg: dict = {}
    run_hooks(["json:dumps"], cfg)  # any importable module:function taking cfg
    with pytest.raises(ModelError, match="add_config hook 'no_such_project:add' not found"):
        run_hooks(["no_such_project:add"], cfg)


@pytest.mark.skipif(HAVE_D2, reason="detectron2 is installed here")
def test_missing_dependency_is_reported_with_install_instructions(tmp_path) -> None:
    rows = json.loads(CliRunner().invoke(cli, ["plugins", "--json"]).output)
    row = next(r for r in rows if r["name"] == "detectron2")
    assert row["status"] == "missing dependency" and row["missing"] == "detectron2"
    assert "scripts/install-detectron2.sh" in row["install"]
    assert ".venv-detectron2" in row["install"] and "torchvision" in row["install"]
    with pytest.raises(PluginError, match="needs detectron2, which is not installed") as err:
        load_segmenter(f"detectron2:{tmp_path / 'c.yaml'},{tmp_path / 'w.pth'}")
    assert "install-detectron2.sh" in str(err.value.hint)
    models = CliRunner().invoke(cli, ["models"]).output
    assert "detectron2" in models

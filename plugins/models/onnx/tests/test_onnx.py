"""ONNX adapter: torch.onnx.export'ed models must predict what the torch model predicts."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
import torch
import torch.nn.functional as F
from click.testing import CliRunner

from segtk.cli import cli
from segtk.core import ModelError, Segmenter, load_segmenter
from segtk.testing import SegmenterSuite
from segtk_onnx import Preprocessing, save_metadata
from segtk_onnx.segmenter import OnnxSegmenter, parse

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


class Net(torch.nn.Module):
    def __init__(self, classes: int = 5) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.body = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, stride=2, padding=1),
                                        torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                        torch.nn.Conv2d(8, classes, 1))

    def forward(self, x):
        return self.body(x)


class ArgmaxNet(Net):
    def forward(self, x):
        return self.body(x).argmax(1)


def load_onnx(spec: str) -> OnnxSegmenter:
    """`load_segmenter(spec)`, the onnx plugin's segmenter."""
    model = load_segmenter(spec)
    assert isinstance(model, OnnxSegmenter)
    return model


def normalise(x: torch.Tensor, bgr: bool = False, scale: float = 1.0) -> torch.Tensor:
    x = x * scale
    if bgr:
        x = x.flip(1)
    return (x - torch.tensor(MEAN).view(1, 3, 1, 1)) / torch.tensor(STD).view(1, 3, 1, 1)


def export(net: torch.nn.Module, path, dynamic: bool = True, size=(32, 48), dynamo=False) -> None:
    x = torch.rand(2, 3, *size)
    if dynamo:  # the default exporter of torch 2.x (needs onnxscript); fixed H,W, dynamic batch
        torch.onnx.export(net.eval(), (x,), str(path), dynamo=True, input_names=["images"],
                          dynamic_shapes={"x": {0: torch.export.Dim("batch")}}, verbose=False)
        return
    axes = {"images": {0: "b", 2: "h", 3: "w"}} if dynamic else None
    torch.onnx.export(net.eval(), (x,), str(path), dynamo=False, input_names=["images"],
                      output_names=["out"], dynamic_axes=axes)


@pytest.fixture(scope="module")
def net() -> Net:
    net = Net().eval()
    norm = net.body[1]
    assert isinstance(norm, torch.nn.BatchNorm2d)
    with torch.no_grad():  # non-trivial BatchNorm statistics
        assert norm.running_mean is not None and norm.running_var is not None
        norm.running_mean.uniform_(-0.5, 0.5)
        norm.running_var.uniform_(0.5, 2.0)
    return net


def test_metadata_round_trip_matches_torch(net, tmp_path) -> None:
    path = tmp_path / "m.onnx"
    export(net, path)
    prep = Preprocessing(classes=list("abcde"), mean=MEAN, std=STD, bgr=True)
    save_metadata(path, prep)
    assert json.loads({p.key: p.value for p in onnx.load(str(path)).metadata_props}["segtk"])["bgr"]
    model = load_onnx(f"onnx:{path}")
    assert model.classes == list("abcde") and model.prep.bgr and model.prep.size is None
    x = torch.rand(3, 3, 37, 53)
    with torch.no_grad():
        ref = F.interpolate(net(normalise(x, bgr=True)), size=(37, 53), mode="bilinear")
    logits = model.logits(x)
    assert logits.shape == (3, 5, 37, 53)
    assert torch.allclose(logits, ref, atol=1e-4)
    assert torch.equal(model.predict(x), ref.argmax(1))
    # Batched equals one at a time, any size.
    single = torch.cat([model.predict(x[i:i + 1]) for i in range(3)])
    assert torch.equal(model.predict(x), single)
    assert model.predict(torch.rand(0, 3, 8, 8)).shape == (0, 8, 8)


def test_fixed_size_dynamo_export_is_resized_to(net, tmp_path) -> None:
    path = tmp_path / "fixed.onnx"
    export(net, path, dynamo=True, size=(32, 48))
    model = load_onnx(f"onnx:{path},classes=a;b;c;d;e,mean=0.485;0.456;0.406,"
                           f"std=0.229;0.224;0.225,threads=1")
    assert model.prep.size == (48, 32)  # W,H read from the graph
    x = torch.rand(2, 3, 20, 30)
    with torch.no_grad():
        inp = F.interpolate(normalise(x), size=(32, 48), mode="bilinear")
        ref = F.interpolate(net(inp), size=(20, 30), mode="bilinear")
    assert torch.allclose(model.logits(x), ref, atol=1e-4)
    assert torch.equal(model.predict(x), ref.argmax(1))


def test_label_output_fixed_batch_and_scale(tmp_path) -> None:
    path = tmp_path / "argmax.onnx"
    net = ArgmaxNet(classes=3).eval()
    x0 = torch.rand(1, 3, 16, 16)
    torch.onnx.export(net, (x0,), str(path), dynamo=False, input_names=["images"])  # batch fixed: 1
    save_metadata(path, Preprocessing(classes=["x", "y", "z"], scale=255.0, mean=(100, 110, 120),
                                      std=(50, 60, 70)))
    model = load_onnx(f"onnx:{path}")
    assert model.fixed_batch == 1 and model.prep.size == (16, 16)
    x = torch.rand(3, 3, 16, 16)
    mean, std = torch.tensor([100.0, 110, 120]).view(1, 3, 1, 1), torch.tensor([50.0, 60, 70]).view(1, 3, 1, 1)
    with torch.no_grad():
        ref = net((x * 255 - mean) / std)  # [3,8,8] labels, stride 2
    ref = F.interpolate(ref[:, None].float(), size=(16, 16), mode="nearest")[:, 0].long()
    pred = model.predict(x)  # three single-image runs
    assert pred.dtype == torch.int64 and torch.equal(pred, ref)
    assert model.predict(torch.rand(2, 3, 24, 24)).shape == (2, 24, 24)  # nearest upsampling
    with pytest.raises(ModelError, match="outputs label maps"):
        model.logits(x)


def test_spec_errors_and_listing(net, tmp_path) -> None:
    path = tmp_path / "bare.onnx"
    export(net, path)
    with pytest.raises(ModelError, match="no class list"):
        load_segmenter(f"onnx:{path}")
    with pytest.raises(ModelError, match="not found"):
        load_segmenter(f"onnx:{tmp_path / 'nope.onnx'}")
    (tmp_path / "junk.onnx").write_bytes(b"not a model")
    with pytest.raises(ModelError, match="not a loadable ONNX model"):
        load_segmenter(f"onnx:{tmp_path / 'junk.onnx'},classes=a")
    with pytest.raises(ModelError, match="unknown onnx option 'colour'"):
        load_segmenter(f"onnx:{path},classes=a,colour=red")
    with pytest.raises(ModelError, match="three|3 numbers"):
        load_segmenter(f"onnx:{path},classes=a,mean=1;2")
    assert parse("m.onnx,classes=a;b,bgr,size=64x32,scale=255") == (
        parse("m.onnx")[0], {"classes": ["a", "b"], "bgr": True, "size": (64, 32), "scale": 255.0}, None)
    rows = json.loads(CliRunner().invoke(cli, ["plugins", "--json"]).output)
    assert [r["status"] for r in rows if r["name"] == "onnx"] == ["ok"]


@pytest.fixture(scope="module")
def exported(net: Net, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("onnx") / "m.onnx"
    export(net, path)
    save_metadata(path, Preprocessing(classes=list("abcde"), mean=MEAN, std=STD))
    return path


class TestOnnxContract(SegmenterSuite):
    """The segmenter contract (segtk.testing), on an exported network with its metadata."""

    @pytest.fixture(autouse=True)
    def _file(self, exported: Path) -> None:
        self.path = exported

    def make(self) -> Segmenter:
        return load_segmenter(f"onnx:{self.path},threads=1")

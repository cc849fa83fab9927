"""TorchScript adapter: metadata round trip, spec options, equality with the eager model."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from segtk.core import ModelError, Segmenter, load_segmenter
from segtk.testing import SegmenterSuite
from segtk_torchscript import save_with_metadata
from segtk_torchscript.segmenter import Preprocessing, TorchScriptSegmenter


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 4, 3, stride=2, padding=1)

    def forward(self, x):
        return self.conv(x)


def test_round_trip_with_metadata_matches_eager(tmp_path) -> None:
    net = Net().eval()
    prep = Preprocessing(classes=["a", "b", "c", "d"], mean=(0.4, 0.5, 0.6), std=(0.2, 0.3, 0.4), bgr=True)
    save_with_metadata(torch.jit.script(net), tmp_path / "m.pt", prep)
    model = load_segmenter(f"torchscript:{tmp_path / 'm.pt'}")
    assert model.classes == ["a", "b", "c", "d"]
    x = torch.rand(2, 3, 9, 11)
    norm = (x.flip(1) - torch.tensor(prep.mean).view(1, 3, 1, 1)) / torch.tensor(prep.std).view(1, 3, 1, 1)
    expected = torch.nn.functional.interpolate(net(norm), size=(9, 11), mode="bilinear").argmax(1)
    assert torch.equal(model.predict(x), expected)
    assert model.logits(x).shape == (2, 4, 9, 11)


def test_spec_options_override_and_errors(tmp_path) -> None:
    torch.jit.save(torch.jit.script(Net()), str(tmp_path / "bare.pt"))
    with pytest.raises(ModelError, match="no class list"):
        load_segmenter(f"torchscript:{tmp_path / 'bare.pt'}")
    model = load_segmenter(f"torchscript:{tmp_path / 'bare.pt'},classes=w;x;y;z,size=8x6,scale=255")
    assert isinstance(model, TorchScriptSegmenter)
    assert model.classes == ["w", "x", "y", "z"] and model.prep.size == (8, 6)
    assert model.predict(torch.rand(1, 3, 5, 7)).shape == (1, 5, 7)
    with pytest.raises(ModelError, match="not found"):
        load_segmenter(f"torchscript:{tmp_path / 'nope.pt'}")
    (tmp_path / "junk.pt").write_bytes(b"not a model")
    with pytest.raises(ModelError, match="not a TorchScript file"):
        load_segmenter(f"torchscript:{tmp_path / 'junk.pt'},classes=a")
    with pytest.raises(ModelError, match="unknown torchscript option"):
        load_segmenter(f"torchscript:{tmp_path / 'bare.pt'},classes=a,colour=red")


@pytest.fixture(scope="module")
def scripted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("torchscript") / "m.pt"
    prep = Preprocessing(classes=["a", "b", "c", "d"], mean=(0.4, 0.5, 0.6), std=(0.2, 0.3, 0.4))
    save_with_metadata(torch.jit.script(Net().eval()), path, prep)
    return path


class TestTorchScriptContract(SegmenterSuite):
    """The segmenter contract (segtk.testing), on a scripted convolution with its metadata."""

    @pytest.fixture(autouse=True)
    def _file(self, scripted: Path) -> None:
        self.path = scripted

    def make(self) -> Segmenter:
        return load_segmenter(f"torchscript:{self.path}")

"""Masked LPIPS on a narrow random LPIPS-VGG saved offline as safetensors: the distance's
defining properties, the mask, the weights file checks, and the metric contract suite."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from segtk.core import PluginError, QualityPair, build
from segtk.testing import MetricSuite
from segtk.testing.metric_suite import toy_pairs
from segtk_metric_masked_lpips import TAPS, MaskedLpips, masked_mean
from segtk_metric_masked_lpips.lpips import CONVS, LpipsNet

WIDTHS = (4, 4, 6, 6, 8, 8, 8, 8, 8, 8, 8, 8, 8)  # VGG16's 13 convolutions, narrowed


def random_lpips(path: Path, seed: int = 0) -> Path:
    """LPIPS-VGG weights of VGG16's layout, narrow and random, as one safetensors file."""
    g = torch.Generator().manual_seed(seed)
    state, channels = {}, 3
    for index, width in zip(CONVS, WIDTHS, strict=True):
        state[f"features.{index}.weight"] = torch.randn(width, channels, 3, 3, generator=g) * 0.3
        state[f"features.{index}.bias"] = torch.randn(width, generator=g) * 0.1
        channels = width
    tapped = (WIDTHS[1], WIDTHS[3], WIDTHS[6], WIDTHS[9], WIDTHS[12])
    for k, width in enumerate(tapped):
        state[f"lin{k}.model.1.weight"] = torch.rand(1, width, 1, 1, generator=g)  # ≥ 0, as trained
    save_file(state, str(path))
    return path


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return random_lpips(tmp_path_factory.mktemp("lpips") / "lpips_vgg.safetensors")


def test_the_network_taps_five_layers(weights: Path) -> None:
    from safetensors.torch import load_file

    net = LpipsNet(load_file(str(weights)))
    x = torch.rand(1, 3, 32, 32) * 255
    assert [t.shape[1] for t in net.taps(x)] == [4, 6, 8, 8, 8] and len(TAPS) == 5
    assert [t.shape[-1] for t in net.taps(x)] == [32, 16, 8, 4, 2]  # four pools between


def test_distance_properties(weights: Path) -> None:
    metric = MaskedLpips({"weights": str(weights), "region": "all"})
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (32, 40, 3), dtype=np.uint8)
    b = np.clip(a.astype(int) + rng.integers(-40, 41, a.shape), 0, 255).astype(np.uint8)
    assert metric.distance_map(a, a).max() == 0.0  # identical images: 0 everywhere
    ab, ba = metric.distance_map(a, b), metric.distance_map(b, a)
    assert (ab >= 0).all() and ab.mean() > 0
    assert np.allclose(ab, ba)  # symmetric
    louder = np.clip(a.astype(int) + 3 * (b.astype(int) - a), 0, 255).astype(np.uint8)
    assert metric.distance_map(a, louder).mean() > ab.mean()


def test_the_region_decides_where_the_map_is_averaged(weights: Path) -> None:
    pair = toy_pairs("recoloured", n=1)[0]
    maps = {}
    for region in ("object", "background", "all"):
        metric = build("metric", "masked-lpips", {"weights": str(weights), "region": region})
        maps[region] = metric.measure([pair]).value
    full = MaskedLpips({"weights": str(weights)}).distance_map(pair.original, pair.edited)
    assert maps["object"] == pytest.approx(full[pair.mask].mean())
    assert maps["background"] == pytest.approx(full[~pair.mask].mean())
    assert maps["all"] == pytest.approx(full.mean())
    assert maps["object"] > maps["background"]  # the recolouring is inside the object
    whole = QualityPair(pair.original, pair.edited, np.ones_like(pair.mask))
    with pytest.raises(PluginError, match="background region of a pair is empty"):
        MaskedLpips({"weights": str(weights), "region": "background"}).measure([whole])
    assert masked_mean(np.arange(4.0).reshape(2, 2), np.eye(2, dtype=bool), "object") == 1.5


def test_a_missing_or_incomplete_weights_file_is_refused(tmp_path: Path, weights: Path) -> None:
    with pytest.raises(PluginError, match="no weights file"):
        MaskedLpips()
    from safetensors.torch import load_file

    state = load_file(str(weights))
    del state["lin4.model.1.weight"]
    save_file(state, str(tmp_path / "partial.safetensors"))
    with pytest.raises(PluginError, match="lacks 1 LPIPS-VGG tensors"):
        MaskedLpips({"weights": str(tmp_path / "partial.safetensors")})
    (tmp_path / "junk.safetensors").write_bytes(b"not a file")
    with pytest.raises(PluginError, match="cannot read"):
        MaskedLpips({"weights": str(tmp_path / "junk.safetensors")})


class TestMaskedLpipsContract(MetricSuite):
    metric_cls = MaskedLpips

    @pytest.fixture(autouse=True)
    def _weights(self, weights: Path) -> None:
        self.params = {"weights": str(weights)}


class TestMaskedLpipsAllContract(TestMaskedLpipsContract):
    @pytest.fixture(autouse=True)
    def _weights(self, weights: Path) -> None:
        self.params = {"weights": str(weights), "region": "all"}

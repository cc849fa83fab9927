"""The Fréchet distance: exact on hand-made Gaussians' features, the defining properties on a
tiny random DINOv2 saved offline, the honest column name, and the metric contract suite."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from segtk.cli import cli
from segtk.core import PluginError, build, read_image
from segtk.testing import MetricSuite, tiny_dinov2
from segtk.testing.metric_suite import toy_pairs
from segtk_metric_fd import FrechetDistance, frechet_distance, trace_sqrt_product


@pytest.fixture(scope="module")
def dino_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_dinov2(tmp_path_factory.mktemp("fd"))


def test_exact_on_sets_of_known_moments() -> None:
    # two sets with diagonal covariances: FD = |mu_a - mu_b|^2 + sum (sqrt(va) - sqrt(vb))^2
    a = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 2.0], [0.0, -2.0]])
    b = 3 * a + np.array([5.0, -1.0])
    va, vb = np.var(a, axis=0, ddof=1), np.var(b, axis=0, ddof=1)
    expected = 26.0 + ((np.sqrt(va) - np.sqrt(vb)) ** 2).sum()
    assert frechet_distance(a, b) == pytest.approx(expected)
    assert frechet_distance(a, a) == pytest.approx(0.0, abs=1e-9)
    assert frechet_distance(a, b) == pytest.approx(frechet_distance(b, a))
    with pytest.raises(PluginError, match="at least 2 images"):
        frechet_distance(a[:1], b)


def test_the_trace_of_the_root_is_scipys_sqrtm() -> None:
    from scipy import linalg

    rng = np.random.default_rng(0)
    for rank in (6, 3):  # full rank, and singular (fewer images than dimensions)
        x, y = rng.normal(size=(rank + 1, 6)), rng.normal(size=(rank + 1, 6)) * 2 + 1
        ca, cb = np.cov(x, rowvar=False), np.cov(y, rowvar=False)
        reference = np.trace(np.real(linalg.sqrtm(ca @ cb)))
        assert trace_sqrt_product(ca, cb) == pytest.approx(reference, rel=1e-6, abs=1e-6)


def test_properties_on_a_tiny_backbone(dino_dir: Path) -> None:
    metric = build("metric", "fd", {"model": str(dino_dir), "batch": "2"})
    assert metric.column() == "FD[dinov2]"
    same = metric.measure(toy_pairs("unchanged", n=4))
    assert same.per_image is None and same.value == pytest.approx(0.0, abs=1e-6)
    pairs = toy_pairs("recoloured", n=4)
    forward = metric.measure(pairs).value
    back = [type(p)(p.edited, p.original, p.mask) for p in pairs]
    assert metric.measure(back).value == pytest.approx(forward, rel=1e-6)  # symmetric
    shifted = toy_pairs("unchanged", n=4)
    for p in shifted:  # brighter edits, further from the originals
        p.edited = np.clip(p.original.astype(int) + 60, 0, 255).astype(np.uint8)
    further = toy_pairs("unchanged", n=4)
    for p in further:
        p.edited = np.clip(p.original.astype(int) + 150, 0, 255).astype(np.uint8)
    near, far = metric.measure(shifted).value, metric.measure(further).value
    assert 0 < near < far


def test_batches_do_not_change_the_features(dino_dir: Path) -> None:
    images = [p.edited for p in toy_pairs("noise", n=5)]
    one = FrechetDistance({"model": str(dino_dir), "batch": 1}).features(images)
    many = FrechetDistance({"model": str(dino_dir), "batch": 4}).features(images)
    assert one.shape == (5, 16) and np.allclose(one, many, atol=1e-6)


def test_a_missing_model_is_refused() -> None:
    with pytest.raises(PluginError, match="metric fd needs a vision backbone"):
        FrechetDistance()


class TestFrechetDistanceContract(MetricSuite):
    metric_cls = FrechetDistance

    @pytest.fixture(autouse=True)
    def _model(self, dino_dir: Path) -> None:
        self.params = {"model": str(dino_dir)}


def test_segtk_bench_edits_quality_fd(dino_dir: Path, tmp_path: Path) -> None:
    """`segtk bench edits --quality fd`: the column FD[dinov2] of each edited subset is the
    distance between the subset's saved source images and its edits."""
    out = tmp_path / "bench"
    run = CliRunner().invoke(cli, ["bench", "edits", "--models", "demo", "--attributes", "color",
                                   "--limit", "3", "--executor", "inline", "--out", str(out),
                                   "--quality", "fd", "--metric-param", f"fd.model={dino_dir}"])
    assert run.exit_code == 0, run.output
    quality = json.loads((out / "table.json").read_text())["quality"]
    assert quality["columns"] == ["FD[dinov2]"] and "FD[dinov2]" in run.output
    folder = out / "edits" / "color"
    records = [json.loads(x) for x in (folder / "manifest.jsonl").read_text().splitlines()]
    metric = FrechetDistance({"model": str(dino_dir)})
    sources = [read_image(folder / "source" / "images" / f"{r['source']}.png") for r in records]
    edits = [read_image(folder / "images" / f"{r['name']}.png") for r in records]
    expected = frechet_distance(metric.features(sources), metric.features(edits))
    assert quality["values"]["color"]["FD[dinov2]"] == pytest.approx(expected, rel=1e-6)

"""`segtk bench augment` prints and writes Gen4Seg Tab. VI (mIoU on the original images only,
one row per augmentation), next to Tab. IV left as it was, with an `edits` row mixing
appearance and geometry edits (geometry_share) whose drawn share its training run records."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

import segtk
from segtk.benchmarks.augment import label_of
from segtk.cli import cli


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> tuple[Path, str, list[str]]:
    """A tiny bench augment run from the trained demo model (so each row's fine-tuning moves its
    scores): 3 demo images, one epoch per row, a baseline and edits."""
    root = tmp_path_factory.mktemp("table-vi")
    edits = []
    for plugin, value in (("color", "red"), ("size", "0.5")):  # an appearance, a geometry edit
        made = invoke("edit", "--plugin", plugin, "--values", value, "--data", "demo",
                      "--out", str(root / plugin))
        assert made.exit_code == 0, made.output
        edits.append(str(root / plugin))
    augment = f"edits:dir={';'.join(edits)},geometry_share=0.5,p=1"
    args = ["bench", "augment", "--model", "demo", "--data", "demo",
            "--split", "", "--eval-split", "", "--eval-limit", "3", "--augment",
            f"baseline,{augment}", "--attributes", "weather", "--values", "weather=fog",
            "--crop", "64x48", "--batch-size", "4", "--lr", "3e-3", "--out", str(root / "bench")]
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    return root / "bench", result.output, args


def miou_by_hand(model_spec: str, images: int) -> float:
    """mIoU % of a model over the first demo images, unedited, summed confusion (numpy)."""
    model, data = segtk.load_model(model_spec), segtk.load_dataset("demo")
    k = len(data.classes)
    conf = np.zeros((k, k), np.int64)
    for i in range(images):
        item = data[i]
        x = torch.from_numpy(item.image).permute(2, 0, 1)[None].float() / 255
        pred = model.predict(x)[0].numpy()
        keep = item.label != 255
        conf += np.bincount(item.label[keep] * k + pred[keep], minlength=k * k).reshape(k, k)
    tp, union = np.diag(conf), conf.sum(0) + conf.sum(1) - np.diag(conf)
    return float(100 * np.mean(tp[union > 0] / union[union > 0]))


def test_table_vi_scores_every_original_image(bench) -> None:
    out, output, _ = bench
    result = json.loads((out / "table.json").read_text())
    rows = result["rows"]
    assert [r["augmentation"] for r in rows][:2] == ["start", "baseline"] and len(rows) == 3
    # the case this guards: Original (Tab. IV) holds only the images weather could edit
    assert result["images"]["original"] < result["images"]["original-all"] == 3
    written = list(csv.reader((out / "table_vi.csv").open()))
    assert written[0] == ["augmentation", "original", "model"]
    assert [w[0] for w in written[1:]] == [r["augmentation"] for r in rows]
    assert [w[2] for w in written[1:]] == [r["model"] for r in rows]
    assert len({w[1] for w in written[1:]}) == 3  # three models, three scores
    for w in written[1:]:  # each row's own model, against a count by hand
        assert float(w[1]) == pytest.approx(miou_by_hand(w[2], 3), abs=1e-3)
    printed = output[output.index("Tab. VI)"):]  # the second table, after its title
    assert "on all 3 original evaluation images" in output
    for w in written[1:]:
        assert re.search(rf"{re.escape(w[0])}\s*│\s*{float(w[1]):.2f}\s*│", printed), w[0]
    # Tab. IV as before: its columns and file unchanged
    assert (out / "table.csv").read_text().splitlines()[0] == \
        "augmentation,original,weather,mR_appearance,model"
    assert result["subsets"] == ["original", "weather"]


def test_the_edits_row_records_the_share_it_drew(bench) -> None:
    out, _, args = bench
    augment = args[args.index("--augment") + 1].split(",", 1)[1]
    epochs = [json.loads(x) for x in (out / "train" / label_of(augment) / "results.jsonl")
              .read_text().splitlines()]
    drawn = epochs[0]["augmenter"]
    assert drawn["replaced"] == drawn["appearance"] + drawn["geometry"] > 0
    assert drawn["geometry_share"] == round(drawn["geometry"] / drawn["replaced"], 4)
    baseline = json.loads((out / "train" / "baseline" / "results.jsonl").read_text().splitlines()[0])
    assert "augmenter" not in baseline  # nothing drawn, nothing recorded


def test_python_api_writes_the_same_table_vi(bench) -> None:
    """segtk.bench_augment resuming the run (nothing trained or scored again) rewrites it."""
    out, _, args = bench
    before = (out / "table_vi.csv").read_bytes()
    (out / "table_vi.csv").unlink()
    table = segtk.bench_augment(args[args.index("--model") + 1], "demo",
                                args[args.index("--augment") + 1], out, split="", eval_split="",
                                eval_limit=3, attributes="weather", values={"weather": ["fog"]},
                                crop="64x48", batch_size=4, lr=3e-3, resume=True)
    assert out / "table_vi.csv" in table.files
    assert (out / "table_vi.csv").read_bytes() == before
    assert [r["original-all"] for r in table] == [r["miou"]["original-all"] for r in table.details["rows"]]


def test_the_report_page_keeps_table_iv_columns(bench) -> None:
    out, _, _ = bench
    result = invoke("report", str(out))
    assert result.exit_code == 0, result.output
    page = (out / "report.html").read_text()
    assert ">weather<" in page and "original-all" not in page


def test_when_every_image_was_edited_original_is_table_vi() -> None:
    """No second scoring of the same images: Original already holds them all."""
    from segtk.benchmarks.augment import every_image, original_rows
    from segtk.benchmarks.edits import Subset

    names = tuple(segtk.load_dataset("demo").names[:3])
    assert every_image([Subset("original", "demo", None, names)], "demo", None, 3) == []
    fewer = every_image([Subset("original", "demo", None, names[:2])], "demo", None, 3)
    assert [(s.name, s.images) for s in fewer] == [("original-all", names)]
    result = {"images": {"original": 3, "weather": 3},
              "rows": [{"augmentation": "start", "miou": {"original": 50.0, "weather": 40.0}}]}
    assert original_rows(result) == [["start", 50.0]]

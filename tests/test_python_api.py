"""The Python API is the CLI's own path: `segtk.attack` and `segtk.bench_attacks` give the CLI's
numbers bit for bit, keep everything in memory without `out`, take specs or loaded objects
alike, and fail with the CLI's one-line errors. The README's "Use from Python" snippet
(tests/snippets/python_api.py) runs as printed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import segtk
from segtk.cli import cli
from segtk.core import Item, SegtkError, read_image
from segtk.jobs.attack import AttackRecord
from segtk.storage.runs import finite_json

SNIPPET = Path(__file__).parent / "snippets" / "python_api.py"


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def lines(typed: list[AttackRecord]) -> list[dict]:
    """The records as the JSON lines they write (a record never equals a dict)."""
    return [r.to_json() for r in typed]


def config(out: Path) -> dict:
    return json.loads((out / "run.json").read_text())["config"]


def files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name not in ("run.json", ".lock")}


def one_line(text: str) -> str:
    return " ".join(text.split())


def test_the_readme_snippet_runs_and_gives_the_cli_numbers(tmp_path: Path, monkeypatch,
                                                           capsys) -> None:
    """The snippet as the README prints it: its attack's records and stored images equal
    `segtk attack`'s results.jsonl and PNGs, its bench table `segtk bench attacks`'s
    table.json, and it writes nothing."""
    code = SNIPPET.read_text()
    assert len(code.strip().splitlines()) <= 15, "the README's snippet is at most 15 lines"
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    scope: dict = {}
    exec(compile(code, str(SNIPPET), "exec"), scope)
    assert capsys.readouterr().out.count("\n") == 2 + len(scope["table"])
    assert list(work.iterdir()) == [], "out=None writes nothing"

    cli_attack = tmp_path / "attack"
    done = invoke("attack", "--plugin", "dla", "--budget", "50", "--eps", "8", "--seed", "0",
                  "--limit", "2", "--out", str(cli_attack))
    assert done.exit_code == 0, done.output
    result = scope["result"]
    assert lines(result.records) == records(cli_attack)
    assert sorted(result.images) == sorted(p.stem for p in (cli_attack / "images").iterdir())
    for name, image in result.images.items():
        assert np.array_equal(image, read_image(cli_attack / "images" / f"{name}.png"))
    assert f"{result.clean_miou:.2f}" in done.output  # both in %
    assert f"{result.adv_image_miou:.2f}" in done.output

    cli_bench = tmp_path / "bench"
    done = invoke("bench", "attacks", "--attacks", "dla,random", "--budgets", "10,50",
                  "--repeats", "1", "--limit", "2", "--executor", "inline", "--out", str(cli_bench))
    assert done.exit_code == 0, done.output
    assert finite_json(list(scope["table"])) == json.loads((cli_bench / "table.json").read_text())
    assert len(scope["table"]) == 5  # clean, and 2 attacks × 2 budgets


def test_an_attack_with_out_writes_the_cli_run_folder(tmp_path: Path) -> None:
    """out=FOLDER: the same records, images, overlays and config as `segtk attack --out`."""
    by_cli, by_api = tmp_path / "cli", tmp_path / "api"
    done = invoke("attack", "--plugin", "random", "--budget", "5", "--seed", "3", "--limit", "2",
                  "--param", "noise_fraction=0.25", "--out", str(by_cli))
    assert done.exit_code == 0, done.output
    result = segtk.attack("demo", "demo", "random", budget=5, seed=3, limit=2,
                          params={"noise_fraction": 0.25}, out=by_api)
    assert files(by_api) == files(by_cli)
    assert config(by_api) == config(by_cli)
    assert result.out == by_api and lines(result.records) == records(by_cli)
    assert np.array_equal(result.images["scene_001"], read_image(by_cli / "images" / "scene_001.png"))


def test_spec_strings_and_loaded_objects_give_one_result(tmp_path: Path) -> None:
    """A loaded model and dataset attack as their specs do, and a run made with them records
    the specs, so that `segtk attack --resume` continues it."""
    by_spec = segtk.attack("demo", "demo", "dla", budget=10, limit=2)
    model, data = segtk.load_model("demo"), segtk.load_dataset("demo")
    by_object = segtk.attack(model, data, "dla", budget=10, limit=2, out=tmp_path / "run")
    assert by_object.records == by_spec.records
    assert by_object.summary == by_spec.summary
    assert (config(tmp_path / "run")["model"], config(tmp_path / "run")["data"]) == ("demo", "demo")
    done = invoke("attack", "--out", str(tmp_path / "run"), "--resume", "--limit", "3")
    assert done.exit_code == 0, done.output
    third = segtk.attack("demo", "demo", "dla", budget=10, limit=3)
    assert records(tmp_path / "run") == lines(third.records)


def test_a_loaded_dataset_iterates_loaded_items() -> None:
    data = segtk.load_dataset("demo", limit=3)
    items = list(data)
    assert [item.name for item in items] == data.names and len(items) == 3
    for item in items:
        assert isinstance(item, Item)
        assert item.image.dtype == np.uint8 and item.image.ndim == 3 and item.image.shape[2] == 3
        assert item.label.shape == item.image.shape[:2]


@pytest.mark.parametrize(("args", "kwargs", "names"), [
    (["--model", "nosuch:thing"], {"model": "nosuch:thing"}, "'nosuch'"),
    (["--data", "demo:fresh=0"], {"data": "demo:fresh=0"}, "demo:fresh=0"),
    (["--param", "exploration=lots"], {"params": {"exploration": "lots"}}, "exploration='lots'"),
])
def test_a_bad_spec_is_the_cli_error(tmp_path: Path, args: list[str], kwargs: dict,
                                     names: str) -> None:
    """A SegtkError naming what is wrong, with the message and hint of the CLI's `Error:` and
    `hint:` lines, and nothing written."""
    done = invoke("attack", "--plugin", "dla", "--out", str(tmp_path / "cli"), *args)
    assert done.exit_code == 1 and "Traceback" not in done.output
    call = {"model": "demo", "data": "demo", "attack": "dla", **kwargs}
    with pytest.raises(SegtkError) as caught:
        segtk.attack(**call, out=tmp_path / "api")
    assert names in caught.value.message
    assert f"Error: {one_line(caught.value.message)}" in one_line(done.output)
    hint = caught.value.hint
    assert (f"hint: {one_line(hint)}" in one_line(done.output)) if hint else "hint:" not in done.output
    assert not (tmp_path / "api").exists() and not (tmp_path / "cli").exists()


def test_benchmarks_take_a_loaded_model_as_its_spec() -> None:
    """A model loaded from a spec runs as that spec (each worker loads its own copy); other
    objects are tested in tests/test_api_objects.py."""
    loaded = segtk.bench_attacks([segtk.load_model("demo")], "demo", attacks="random",
                                 budgets=[2], repeats=1, limit=1)
    assert list(loaded) == list(segtk.bench_attacks("demo", "demo", attacks="random",
                                                    budgets=[2], repeats=1, limit=1))


def test_bench_attacks_with_out_writes_the_cli_run_folder(tmp_path: Path) -> None:
    by_cli, by_api = tmp_path / "cli", tmp_path / "api"
    done = invoke("bench", "attacks", "--attacks", "random,dla:exploration=0.5", "--budgets", "4,8",
                  "--eps", "4,8", "--repeats", "2", "--limit", "1", "--executor", "inline",
                  "--out", str(by_cli))
    assert done.exit_code == 0, done.output
    table = segtk.bench_attacks("demo", "demo", ["random", "dla:exploration=0.5"], [4, 8],
                                eps=[4, 8], repeats=2, limit=1, executor="inline", out=by_api)
    assert config(by_api) == config(by_cli)
    assert sorted(map(json.dumps, records(by_api))) == sorted(map(json.dumps, records(by_cli)))
    assert (by_api / "table.csv").read_bytes() == (by_cli / "table.csv").read_bytes()
    assert sorted(p.name for p in table.files) == ["curves.png", "table.csv", "table.json"]
    assert table.details["sheet"] == by_api / "contact_sheet.png"
    again = segtk.bench_attacks("demo", "demo", ["random", "dla:exploration=0.5"], [4, 8],
                                eps=[4, 8], repeats=2, limit=1, out=by_cli, table_only=True)
    assert list(again) == list(table)


def test_edit_and_bench_edits_are_the_cli_runs(tmp_path: Path) -> None:
    done = invoke("edit", "--plugin", "color", "--values", "red,blue", "--limit", "2",
                  "--sheet-rows", "0", "--out", str(tmp_path / "cli-edit"))
    assert done.exit_code == 0, done.output
    edited = segtk.edit("demo", "color", ["red", "blue"], tmp_path / "api-edit", limit=2,
                        sheet_rows=0)
    assert files(tmp_path / "api-edit") == files(tmp_path / "cli-edit")
    assert edited[0]["outcome"] == "edited" and edited[0]["edits"] == len(edited.details["edited"])

    done = invoke("bench", "edits", "--attributes", "color,size", "--values", "color=red",
                  "--limit", "2", "--executor", "inline", "--out", str(tmp_path / "cli-bench"))
    assert done.exit_code == 0, done.output
    table = segtk.bench_edits("demo", "demo", ["color", "size"], {"color": ["red"]},
                              tmp_path / "api-bench", limit=2, executor="inline")
    cli_table = json.loads((tmp_path / "cli-bench" / "table.json").read_text())
    assert table.details == cli_table
    assert {(r["subset"], r["miou"]) for r in table} == set(cli_table["miou"]["demo"].items())


def test_train_is_the_cli_training(tmp_path: Path) -> None:
    done = invoke("train", "--model", "demo", "--data", "demo", "--limit", "2", "--batch-size", "2",
                  "--crop", "64x48", "--out", str(tmp_path / "cli"))
    assert done.exit_code == 0, done.output
    table = segtk.train("demo", "demo", tmp_path / "api", limit=2, batch_size=2, crop=(64, 48))
    assert [r["loss"] for r in table] == [r["loss"] for r in records(tmp_path / "cli")]
    assert config(tmp_path / "api") == config(tmp_path / "cli")
    model = segtk.load_model(table.details["spec"])
    assert model.classes == segtk.load_dataset("demo").classes


def test_predict_and_report_are_the_cli_commands(tmp_path: Path) -> None:
    done = invoke("predict", "--limit", "3", "--json", "--quiet", "--out", str(tmp_path / "cli"))
    assert done.exit_code == 0, done.output
    seen: list[int] = []
    summary = segtk.predict("demo", "demo", tmp_path / "api", limit=3, on_batch=seen.append)
    assert json.loads(done.output) == {k: v for k, v in summary.items() if k != "iou"}
    assert sum(seen) == summary["images"] == 3
    assert list(summary["iou"]) == segtk.load_dataset("demo").classes  # IoU per class name
    assert files(tmp_path / "api") == files(tmp_path / "cli")  # labels and overlays

    run = tmp_path / "attack"
    segtk.attack("demo", "demo", "random", budget=3, limit=1, out=run)
    pages: list[Path] = []
    page = segtk.report(run, on_page=pages.append)
    assert page == run / "report.html" and pages == [run]
    api_page = page.read_text()
    done = invoke("report", str(run))
    assert done.exit_code == 0, done.output
    assert page.read_text() == api_page


def test_to_pandas_says_what_to_install_without_pandas(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if it were not installed
    table = segtk.Table([{"a": 1}])
    with pytest.raises(SegtkError, match="needs pandas") as caught:
        table.to_pandas()
    assert "pip install pandas" in (caught.value.hint or "")


def test_to_pandas_gives_the_rows() -> None:
    pandas = pytest.importorskip("pandas")
    frame = segtk.Table([{"attack": "dla", "miou_mean": 1.5}]).to_pandas()
    assert isinstance(frame, pandas.DataFrame) and frame.to_dict("records") == [
        {"attack": "dla", "miou_mean": 1.5}]


def test_import_segtk_stays_light() -> None:
    """`import segtk` loads neither torch nor the API until the API is used."""
    code = ("import sys, segtk; print('torch' in sys.modules, 'segtk.api' in sys.modules); "
            "segtk.load_model; print('segtk.api' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert out.stdout.split() == ["False", "False", "True"]

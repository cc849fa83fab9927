"""`segtk report`: attack, bench, edit and bench-edits pages, their files and links, and a real
browser.

The runs are made once per module through the CLI (`--report`) with the tiny model on a tiny
folder dataset; the edit run is written by hand in `segtk edit`'s layout. The browser tests
open the pages in headless Chromium (skipped where /usr/bin/chromium is absent).
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import types
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

from segtk.cli import cli
from segtk.core import SegmenterPlugin, SegtkError, hookimpl, registry
from segtk.core._data import default_palette, read_image, read_label, to_uint8, write_png
from segtk.core._plugins import get_plugin_manager, reset_plugin_manager
from segtk.imaging import amplify
from segtk.jobs.attack import AttackRecord, summarise
from segtk.reports.svg import Series, line_chart, nice_ticks
from segtk.reports.writer import FILES_DIR, detect_kind, write_report
from segtk.storage.runs import read_results
from segtk.testing import TinySegmenter, toy_batch

# --- run directories ----------------------------------------------------------------------------


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def ok(*args: str):
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    return result


def write_data(root: Path, n: int = 3) -> Path:
    images, labels = toy_batch(n, 24, 32, seed=3)
    ids = labels.numpy()
    ids[:, :4, :] = (ids[:, :4, :] + 1) % 4  # some errors, so there is something to lose
    ids[:, 0, 0] = 255
    for i, image in enumerate(to_uint8(images)):
        write_png(root / "images" / f"img{i}.png", image)
        write_png(root / "labels" / f"img{i}.png", ids[i].astype(np.uint8))
    (root / "classes.txt").write_text("\n".join(TinySegmenter().classes) + "\n")
    return root


def write_edit_run(out: Path, data: Path) -> Path:
    """`segtk edit`'s layout: images/, labels/, masks/, source/, classes.txt, manifest.jsonl,
    skipped.jsonl, contact_sheet.png and run.json (config and summary)."""
    classes = (data / "classes.txt").read_text().split()
    manifest, sheet = [], []
    for src in sorted((data / "images").glob("*.png")):
        image, label = read_image(src), read_label(data / "labels" / src.name)
        write_png(out / "source" / "images" / src.name, image)
        write_png(out / "source" / "labels" / src.name, label.astype(np.uint8))
        mask = label == 1
        for value, colour in (("red", [200, 0, 0]), ("blue", [0, 0, 200])):
            name = f"{src.stem}__{value}"
            edited = image.copy()
            edited[mask] = edited[mask] // 4 + np.array(colour, np.uint8)
            write_png(out / "images" / f"{name}.png", edited)
            write_png(out / "labels" / f"{name}.png", label.astype(np.uint8))
            write_png(out / "masks" / f"{name}.png", mask.astype(np.uint8) * 255)
            manifest.append({"name": name, "source": src.stem, "value": value, "variant": 0,
                             "attribute": "color", "editor": "color", "kind": "appearance",
                             "level": "object", "class": classes[1],
                             "object_area": round(float(mask.mean()), 5),
                             "prompt": f"a photo of a {value} {classes[1]}", "backend": "classical",
                             "parameters": {"strength": 1.0}, "seed": 7, "run_seed": 0,
                             "clip_score": 0.25})
            sheet.append(edited)
    skipped = {"name": "img9__red", "source": "img9", "value": "red", "variant": 0,
               "reason": "tiny-object", "detail": "largest region covers 3% < 20%"}
    (out / "classes.txt").write_text("\n".join(classes) + "\n")
    (out / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in manifest))
    (out / "skipped.jsonl").write_text(json.dumps(skipped) + "\n")
    write_png(out / "contact_sheet.png", np.concatenate(sheet, axis=1))
    (out / "run.json").write_text(json.dumps({
        "command": "segtk edit --plugin color --values red,blue --data folder:data --out edit",
        "kind": "edit",
        "versions": {"segtk": "0.1.0"},
        "config": {"plugin": "color", "values": ["red", "blue"], "backend": "classical",
                   "data": f"folder:{data}", "split": None, "seed": 0},
        "summary": {"planned": 8, "edited": 6, "skipped": {"tiny-object": 1}, "sources_edited": 3},
    }))
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    data = write_data(root / "data")
    reset_plugin_manager()
    get_plugin_manager().register(types.SimpleNamespace(register_models=hookimpl(
        lambda register: register(SegmenterPlugin("tiny", lambda arg: TinySegmenter(), "tiny",
                                                  "--model tiny")))), name="tiny-report-test")
    registry.reset()
    attack = ["attack", "--plugin", "dla", "--model", "tiny", "--data", f"folder:{data}",
              "--budget", "6", "--report", "--out"]
    try:
        ok(*attack, str(root / "attack"))
        ok(*attack, str(root / "nosave"), "--no-save-images")
        ok("bench", "attacks", "--attacks", "dla,random", "--budgets", "3,6", "--repeats", "2",
           "--model", "tiny", "--data", f"folder:{data}", "--executor", "inline",
           "--out", str(root / "bench"), "--report")
        edit = write_edit_run(root / "edit", data)
        ok("report", str(edit))
        yield types.SimpleNamespace(root=root, data=data, attack=root / "attack",
                                    nosave=root / "nosave", bench=root / "bench", edit=edit)
    finally:
        reset_plugin_manager()
        registry.reset()


def page(run: Path) -> str:
    return (run / "report.html").read_text()


def links(text: str) -> list[str]:
    return [html.unescape(v) for v in re.findall(r'(?:src|href)="([^"]*)"', text)]


# --- content ------------------------------------------------------------------------------------


def test_kinds_are_detected(runs) -> None:
    assert [detect_kind(runs.attack), detect_kind(runs.bench), detect_kind(runs.edit)] == \
        ["attack", "bench-attacks", "edit"]
    assert json.loads((runs.bench / "run.json").read_text())["kind"] == "bench-attacks"


def test_a_run_json_without_a_kind_says_how_to_get_one(runs, tmp_path) -> None:
    """Runs from before kinds were recorded: no guessing; a --resume rewrites run.json."""
    run = tmp_path / "old"
    shutil.copytree(runs.attack, run)
    meta = json.loads((run / "run.json").read_text())
    del meta["kind"]
    (run / "run.json").write_text(json.dumps(meta))
    result = invoke("report", str(run))
    assert result.exit_code == 1 and "does not say which command made it" in result.output
    assert "--resume" in result.output and "Traceback" not in result.output
    ok("attack", "--plugin", "dla", "--model", "tiny", "--data", f"folder:{runs.data}",
       "--budget", "6", "--out", str(run), "--resume")
    assert detect_kind(run) == "attack"
    ok("report", str(run))


def test_a_kind_without_a_page_is_one_clear_error(tmp_path) -> None:
    (tmp_path / "run.json").write_text(json.dumps({"kind": "bench-speed", "config": {}}))
    result = invoke("report", str(tmp_path))
    assert result.exit_code == 1 and "no page for `segtk bench speed` runs" in result.output
    assert "segtk train and segtk bench augment" in result.output  # what it does report


def test_attack_summary_is_recomputed_from_the_confusions(runs) -> None:
    records = AttackRecord.keyed(read_results(runs.attack / "results.jsonl"), "results").values()
    t = summarise(list(records), 4).table
    text = page(runs.attack)
    for value in (t["clean_miou"], t["adv_miou"], t["clean_image_miou"], t["adv_image_miou"],
                  t["clean_pacc"], t["adv_pacc"]):
        assert f"{100 * value:.2f}" in text
    command = json.loads((runs.attack / "run.json").read_text())["command"]
    assert html.escape(command.partition(" ")[2]) in text and "torch" in text  # command, versions
    rows = text[text.index('id="per-image"'):]
    drops = [float(v) for v in re.findall(r'<td class="n drop" data-v="([^"]+)"', rows)]
    assert len(drops) == 3 and drops == sorted(drops, reverse=True)  # rows by mIoU drop


def test_attack_pictures_are_written_next_to_the_report(runs) -> None:
    files = runs.attack / FILES_DIR
    for name in ("img0", "img1", "img2"):
        clean = read_image(runs.data / "images" / f"{name}.png")
        adv = read_image(runs.attack / "images" / f"{name}.png")
        assert (read_image(files / "clean" / f"{name}.png") == clean).all()
        assert (read_image(files / "perturbation" / f"{name}.png") == amplify(clean, adv)).all()
        assert (files / "label" / f"{name}.png").is_file()
    text = page(runs.attack)
    for rel in ("images/img0.png", "overlays/img0_clean.png", "overlays/img0_adv.png",
                "report_files/clean/img0.png", "report_files/perturbation/img0.png",
                "report_files/label/img0.png"):
        assert f'src="{rel}"' in text


@pytest.mark.parametrize("kind", ["attack", "nosave", "bench", "edit"])
def test_every_link_is_relative_and_resolves_offline(runs, kind) -> None:
    run = getattr(runs, kind)
    text = page(run)
    assert not re.search(r"(?:src|href)=\"(?:https?:|//|/)", text)  # nothing from the network
    assert not re.search(r"<link|@import|url\(", text)  # CSS inline, no external sheets
    for link in links(text):
        assert (run / unquote(link)).is_file(), link


def test_a_run_without_saved_images_says_so(runs) -> None:
    text = page(runs.nosave)
    assert "--no-save-images" in text
    assert not (runs.nosave / FILES_DIR / "perturbation").exists()
    assert "report_files/clean/img0.png" in text  # the dataset still gives clean image and label
    assert text.count("not available") == 3 * 4  # adv, perturbation and both predictions


def test_bench_table_matches_the_benchmark(runs) -> None:
    text = page(runs.bench)
    rows = json.loads((runs.bench / "table.json").read_text())
    assert {r["attack"] for r in rows} == {"clean", "dla", "random"}
    for r in rows:
        cell = (f"{r['miou_mean']:.2f}" if r["attack"] == "clean"
                else f"{r['miou_mean']:.2f} ± {r['miou_std']:.2f}")
        assert cell in text
        assert f"{r['pacc_mean']:.2f}" in text
    assert text.count("<polyline") == 2  # one curve per attack
    for f in ("table.csv", "table.json", "curves.png"):
        assert f'href="{f}"' in text


def test_edit_report_has_the_sheet_values_skips_and_originals(runs) -> None:
    text = page(runs.edit)
    assert "color edits of folder:data" in text
    assert 'src="contact_sheet.png"' in text
    table = text[text.index('id="attributes"'):text.index('id="skipped"')]
    cells = r'<td class="n">(\d+)</td><td class="n">(\d+)</td><td class="n">(\d+)</td>'
    counts = re.findall(cells, table)
    assert counts == [("3", "1", "3"), ("3", "0", "3"), ("6", "1", "3")]  # red, blue, all values
    assert "clip_score" in table and "0.250" in table
    skips = text[text.index('id="skipped"'):text.index('id="images"')]
    assert "tiny-object" in skips and "3% &lt; 20%" in skips
    assert text.count('<td class="name"') == 6
    assert 'src="source/images/img0.png"' in text  # the original next to each edit
    assert (runs.edit / FILES_DIR / "mask" / "img0__red.png").is_file()
    assert all(c in text for c in ("class0", "class3"))


def test_legend_uses_the_dataset_palette(runs, tmp_path) -> None:
    colours = ["#{:02x}{:02x}{:02x}".format(*c) for c in default_palette(4)]
    assert all(c in page(runs.attack) for c in colours)  # folder datasets use default_palette
    # A hand-written run on the demo dataset gets the demo's own colours and class names.
    from segtk.core import load_dataset
    demo = load_dataset("demo", limit=1)
    run = tmp_path / "demo-run"
    run.mkdir()
    k = len(demo.classes)
    conf = np.eye(k, k + 1, dtype=int).tolist()
    (run / "run.json").write_text(json.dumps({"command": "segtk attack --plugin dla", "kind": "attack",
                                              "config": {"attack": "dla", "data": "demo"}}))
    (run / "results.jsonl").write_text(json.dumps({
        "image": demo.names[0], "clean_miou": 1.0, "adv_miou": 0.5, "clean_pacc": 1.0,
        "adv_pacc": 0.5, "queries": 3, "linf": 8, "attack_proxy": 0.5, "history": [1.0, 0.7, 0.5],
        "clean_confusion": conf, "adv_confusion": conf}) + "\n")
    text = page(run) if write_report(run) else ""
    assert demo.palette is not None
    for name, colour in zip(demo.classes, demo.palette):
        assert html.escape(name) in text and "#{:02x}{:02x}{:02x}".format(*colour) in text
    assert "--no-save-images" in text and "report_files/clean/" in text


def test_an_unloadable_dataset_is_noted_and_data_overrides_it(runs, tmp_path) -> None:
    run = tmp_path / "moved"
    shutil.copytree(runs.attack, run)
    meta = json.loads((run / "run.json").read_text())
    meta["config"]["data"] = "folder:does/not/exist"
    (run / "run.json").write_text(json.dumps(meta))
    ok("report", str(run))
    text = page(run)
    assert "folder:does/not/exist could not be loaded" in text and "class 0" in text
    assert not (run / FILES_DIR).exists() or not any((run / FILES_DIR).iterdir())
    ok("report", str(run), "--data", f"folder:{runs.data}")
    assert "does/not/exist could not" not in page(run) and (run / FILES_DIR / "clean" / "img0.png").is_file()


def test_a_relative_data_path_is_found_from_the_folders_above_the_run(runs) -> None:
    run = runs.root / "runs" / "from-root"  # as if made from runs.root with --data folder:data
    shutil.copytree(runs.attack, run)
    meta = json.loads((run / "run.json").read_text())
    meta["config"]["data"] = "folder:data"
    (run / "run.json").write_text(json.dumps(meta))
    text = page(run) if write_report(run) else ""
    assert "was found at ../../data" in text and "report_files/clean/img0.png" in text
    assert str(runs.root) not in text  # shown relative to the run folder


def test_open_launches_the_page(runs, monkeypatch) -> None:
    import click

    opened = []
    monkeypatch.setattr(click, "launch", lambda url, **kw: opened.append(url))
    ok("report", str(runs.edit), "--open")
    assert opened == [str(runs.edit / "report.html")]


def test_not_a_run_directory_is_one_clear_error(tmp_path) -> None:
    result = invoke("report", str(tmp_path))
    assert result.exit_code == 1 and "not a segtk run directory" in result.output
    (tmp_path / "run.json").write_text(json.dumps({"kind": "attack", "config": {"attack": "dla"}}))
    with pytest.raises(SegtkError, match="no finished images"):
        write_report(tmp_path)
    assert invoke("report", "--help").output.count("Example") == 1


def test_stale_report_files_are_removed(runs, tmp_path) -> None:
    run = tmp_path / "again"
    shutil.copytree(runs.attack, run)
    (run / FILES_DIR / "old.png").write_bytes(b"stale")
    write_report(run)
    assert not (run / FILES_DIR / "old.png").exists()


def test_chart_ticks_and_svg() -> None:
    assert nice_ticks(61.3, 88.2) == [60, 70, 80, 90]
    assert nice_ticks(70.4, 82.6) == [70, 72.5, 75, 77.5, 80, 82.5, 85]
    assert nice_ticks(0.0, 1.0) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    svg = line_chart([Series("a<b", [80.0, 70.0, 65.0], bands=(([60, 60, 60], [90, 80, 70]),))],
                     xlabel="queries", ylabel="proxy")
    assert svg.startswith("<svg") and "a&lt;b" in svg and svg.count("<polygon") == 1


# --- in a real browser --------------------------------------------------------------------------

CHROMIUM = shutil.which("chromium")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH "
                                    "(apt-get install chromium; .ci/run installs it)")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars"]

# Appended to a copy of the page: clicks sort headers and writes the resulting order to the DOM.
SORT_PROBE = """<script>
window.addEventListener("load", function () {
  function names() { return Array.prototype.map.call(
    document.querySelectorAll("#per-image tbody td.name"), function (td) { return td.dataset.v; }).join(","); }
  function drops() { return Array.prototype.map.call(
    document.querySelectorAll("#per-image tbody td.drop"), function (td) { return td.dataset.v; }).join(","); }
  var head = document.querySelectorAll("#per-image thead th");
  document.body.dataset.initial = names();
  head[0].click(); document.body.dataset.byName = names();
  head[0].click(); document.body.dataset.byNameDesc = names();
  head[3].click(); document.body.dataset.byDrop = drops();
  head[3].click(); document.body.dataset.byDropAgain = drops();
});
</script>"""


def chromium(tmp_path: Path, *args: str) -> str:
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    assert CHROMIUM is not None
    done = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def dom(tmp_path: Path, page_file: Path) -> tuple[str, dict[str, str]]:
    """The DOM after the load event, and <body>'s data-* attributes."""
    out = chromium(tmp_path, "--dump-dom", page_file.resolve().as_uri())
    body = re.search(r"<body([^>]*)>", out)
    assert body, out[:500]
    attrs = {k: html.unescape(v) for k, v in re.findall(r'data-([\w-]+)="([^"]*)"', body.group(1))}
    return out, attrs


@needs_chromium
@pytest.mark.parametrize("kind", ["attack", "nosave", "bench", "edit"])
def test_browser_loads_every_picture_and_table(runs, kind, tmp_path) -> None:
    run = getattr(runs, kind)
    out, body = dom(tmp_path, run / "report.html")
    images = page(run).count("<img ")
    assert body["images"] == f"{images}/{images}" and body["images-ok"] == "yes"
    assert images == {"attack": 3 * 6, "nosave": 3 * 2, "bench": 1, "edit": 1 + 6 * 4}[kind]
    assert out.count("<table") == {"attack": 3, "nosave": 3, "bench": 3, "edit": 3}[kind]
    assert re.search(r'<div[^>]*id="broken"[^>]*hidden', out)  # no "pictures missing" banner
    if kind == "bench":
        assert out.count('<svg class="chart"') == 1 and "dla" in out


@needs_chromium
def test_browser_sorts_the_per_image_rows(runs, tmp_path) -> None:
    text = page(runs.attack).replace("</body>", SORT_PROBE + "</body>")
    probe = runs.attack / "sort-probe.html"  # beside report.html so its relative links work
    probe.write_text(text)
    try:
        _, body = dom(tmp_path, probe)
    finally:
        probe.unlink()
    assert body["images-ok"] == "yes"
    assert body["by-name"] == "img0,img1,img2" and body["by-name-desc"] == "img2,img1,img0"
    drops = [float(v) for v in body["by-drop"].split(",")]
    assert drops == sorted(drops, reverse=True)  # a number column sorts largest first
    again = [float(v) for v in body["by-drop-again"].split(",")]
    assert again == sorted(again)


@needs_chromium
def test_browser_flags_pictures_left_behind(runs, tmp_path) -> None:
    lone = tmp_path / "lone"
    lone.mkdir()
    shutil.copy(runs.attack / "report.html", lone / "report.html")  # without its folder
    out, body = dom(tmp_path, lone / "report.html")
    assert body["images-ok"] == "no" and body["images"] == "0/18"
    assert "18 of 18 pictures could not be loaded" in out


@needs_chromium
def test_browser_screenshot_shows_the_styled_page(runs, tmp_path) -> None:
    png = tmp_path / "attack.png"
    chromium(tmp_path, f"--screenshot={png}", "--window-size=1280,2000",
             (runs.attack / "report.html").resolve().as_uri())
    shot = np.asarray(Image.open(png).convert("RGB")).astype(int)
    assert shot.shape == (2000, 1280, 3)
    assert np.abs(shot[20, 20] - [0x17, 0x21, 0x2F]).max() <= 3  # the dark header: CSS applied
    assert shot.std() > 20  # not a blank page


# --- segtk bench edits and segtk edit with --report ------------------------------------------------

BENCH_EDITS = ["bench", "edits", "--models", "demo", "--attributes", "color,size", "--values",
               "color=red,blue", "--values", "size=0.4", "--limit", "3", "--executor", "inline"]


@pytest.fixture(scope="module")
def bench_edits_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bench-edits") / "run"
    ok(*BENCH_EDITS, "--out", str(out), "--report")
    return out


def test_bench_edits_report_has_the_paper_table_chart_and_subset_reports(bench_edits_run,
                                                                         tmp_path) -> None:
    run = bench_edits_run
    assert detect_kind(run) == "bench-edits"
    table = json.loads((run / "table.json").read_text())
    text = page(run)
    grid = text[text.index('id="miou-table"'):text.index('id="chart"')]
    for subset, value in table["miou"]["demo"].items():
        assert f">{subset}<" in grid and f">{value:.2f}<" in grid
    assert {g["group"] for g in table["groups"]} == {"appearance", "geometry"}
    for g in table["groups"]:
        assert f">{g['rmiou']:.2f}<" in grid and f">{g['mr']:.3f}<" in grid
    assert 'src="miou.png"' in text
    for attr in ("color", "size-0.4"):
        assert f'href="edits/{attr}/report.html"' in text
        assert detect_kind(run / "edits" / attr) == "edit"
        assert f"{attr.split('-')[0]} edits of demo" in page(run / "edits" / attr)
    for sub in (run, run / "edits" / "color", run / "edits" / "size-0.4"):
        sub_text = page(sub)
        assert not re.search(r"(?:src|href)=\"(?:https?:|//|/)", sub_text)
        for link in links(sub_text):
            assert (sub / unquote(link)).is_file(), (sub, link)
    copy = tmp_path / "no-run-json"  # no guessing from the files
    shutil.copytree(run, copy)
    (copy / "run.json").unlink()
    with pytest.raises(SegtkError, match=r"not a segtk run directory \(no run.json\)"):
        detect_kind(copy)


def test_edit_report_flag_writes_the_page(tmp_path) -> None:
    out = tmp_path / "edit"
    ok("edit", "--plugin", "material", "--values", "wood", "--limit", "2", "--sheet-rows", "0",
       "--out", str(out), "--report")
    assert detect_kind(out) == "edit"
    text = page(out)
    assert "material edits of demo" in text and text.count('<td class="name"') >= 1
    for link in links(text):
        assert (out / unquote(link)).is_file(), link


@needs_chromium
@pytest.mark.parametrize("where", ["", "edits/color"])
def test_browser_loads_the_bench_edits_pages(bench_edits_run, where, tmp_path) -> None:
    run = bench_edits_run / where
    out, body = dom(tmp_path, run / "report.html")
    images = page(run).count("<img ")
    assert images >= 1 and body["images"] == f"{images}/{images}" and body["images-ok"] == "yes"
    assert re.search(r'<div[^>]*id="broken"[^>]*hidden', out)
    if not where:
        assert out.count("<table") == 3  # mIoU per subset, RmIoU/mR per group, subsets
        assert 'class="sortable bench-edits-table"' in out and 'id="groups"' in out
        assert out.count('href="edits/') == 2
    else:
        assert 'id="per-image"' in out and 'id="attributes"' in out

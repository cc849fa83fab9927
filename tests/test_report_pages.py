"""Complete reports: the bench-attacks page after resumes (every attack in its title, tables,
curves and labelled contact sheet, with the visibility table), the train and bench-augment
pages, and no absolute path of the machine on any page or chart.

The runs are made once per module through the CLI, as a user would type them: the demo model
on two demo images copied into a folder dataset inside a fake home folder, the command line
recorded with absolute paths (sys.argv as the installed `segtk` script sees it). The bench
attacks the trained model (its model.spec, an absolute path too), so titles, tables and charts
have a path to hide, and so does a bench edits of it. Charts drawn by matplotlib are checked
through the text they draw.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import statistics
import subprocess
import sys
import types
from pathlib import Path
from unittest import mock
from urllib.parse import unquote

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image, PngImagePlugin

import segtk.benchmarks.attacks as bench_attacks_module
import segtk.benchmarks.augment as bench_augment_module
import segtk.benchmarks.edits as bench_edits_module
import segtk.reports.train as train_report
from segtk.cli import cli
from segtk.core import load_dataset, load_segmenter
from segtk.core._data import write_png
from segtk.core._specs import brief_spec, resolve_spec
from segtk.jobs.predict import predict_dataset
from segtk.reports.common import relative_paths, shown_path
from segtk.reports.svg import SERIES_COLOURS
from segtk.reports.writer import FILES_DIR, detect_kind, write_report
from segtk.storage.runs import read_results

# The first run, then two --resumes; tabled in the last --resume's --attacks order (simba), then
# the run's others as first recorded.
ATTACKS = ["simba", "dla", "random", "colour-stripes"]


@pytest.mark.parametrize("spec, shown", [
    ("espnet:camvid=/home/me/models/espnet_camvid.safetensors", "espnet:camvid"),
    ("hf:../shared/models/segformer-b0", "hf:segformer-b0"),
    ("/home/me/runs/t/model.spec", "t/model.spec"),
    ("camvid:/home/me/data/camvid/", "camvid:camvid"),
    ("onnx:/srv/m.onnx", "onnx:m.onnx"),
    ("demo", "demo"),
    ("dla:direction=horizontal", "dla:direction=horizontal"),
])
def test_brief_spec_drops_the_folders_of_a_machine(spec, shown) -> None:
    assert brief_spec(spec) == shown


def found(pattern: str, text: str) -> re.Match[str]:
    match = re.search(pattern, text)
    assert match is not None, f"no {pattern!r} in the page"
    return match


def png(path: Path) -> PngImagePlugin.PngImageFile:
    """A PNG the reports wrote, opened with its text chunks."""
    image = Image.open(path)
    assert isinstance(image, PngImagePlugin.PngImageFile)
    return image


def test_absolute_paths_are_shown_relative_to_the_run(tmp_path, monkeypatch) -> None:
    home, run = tmp_path / "home", tmp_path / "home" / "runs" / "b"
    monkeypatch.setenv("HOME", str(home))
    assert shown_path(str(run), run) == "."
    assert shown_path(str(run / "sheet" / "x.png"), run) == "sheet/x.png"
    assert shown_path(str(home / "data"), run) == "../../data"
    elsewhere = tmp_path / "scratch" / "b"  # a run outside home: home's paths under ~
    assert shown_path(str(home / "data"), elsewhere) == "~/data"
    text = f"segtk bench attacks --data folder:{home}/data --out {run} (see https://x.org/a)"
    assert relative_paths(text, run) == \
        "segtk bench attacks --data folder:../../data --out . (see https://x.org/a)"
    assert relative_paths("mIoU / pixel accuracy, a/b, 8/255", run) == \
        "mIoU / pixel accuracy, a/b, 8/255"


# --- the runs --------------------------------------------------------------------------------


def demo_folder(root: Path, n: int = 2) -> Path:
    """The first n demo images as a folder dataset (so --data is a path on this machine)."""
    demo = load_dataset("demo", limit=n)
    for item in (demo[i] for i in range(n)):
        write_png(root / "images" / f"{item.name}.png", item.image)
        write_png(root / "labels" / f"{item.name}.png", item.label.astype(np.uint8))
    (root / "classes.txt").write_text("\n".join(demo.classes) + "\n")
    return root


def segtk(*args: str) -> None:
    """Run the CLI in-process as the installed script would be run: run.json records argv."""
    with mock.patch.object(sys, "argv", ["/opt/venv/bin/segtk", *args]):
        result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output


def drawn_texts(chart_texts: dict[str, list[str]], original):
    """A save_figure that first records every text the figure draws (titles, legends, axes)."""
    def save(fig, path) -> None:
        from matplotlib.text import Text

        texts = [t.get_text() for t in fig.findobj(Text) if t.get_text()]
        chart_texts[f"{Path(path).parent.name}/{Path(path).name}"] = texts
        original(fig, path)
    return save


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    data = demo_folder(home / "data")
    root = home / "runs"
    charts: dict[str, list[str]] = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(home))
        mp.setenv("OMP_NUM_THREADS", "1")
        for module in (bench_attacks_module, bench_augment_module, bench_edits_module):
            mp.setattr(module, "save_figure", drawn_texts(charts, module.save_figure))
        train = ["train", "--model", "demo", "--data", f"folder:{data}", "--crop", "64x48",
                 "--out", str(root / "train")]
        segtk(*train, "--epochs", "2")
        segtk(*train, "--epochs", "3", "--resume")
        bench = ["bench", "attacks", "--budgets", "2,4", "--repeats", "1", "--executor", "inline",
                 "--out", str(root / "bench")]
        segtk(*bench, "--attacks", "dla,random", "--model", str(root / "train" / "model.spec"),
              "--data", f"folder:{data}")
        segtk(*bench, "--resume", "--attacks", "colour-stripes")
        segtk(*bench, "--resume", "--attacks", "simba", "--report")
        augment = ["bench", "augment", "--model", "demo", "--data", f"folder:{data}",
                   "--attributes", "color", "--values", "color=red", "--epochs", "1",
                   "--crop", "64x48", "--out", str(root / "augment")]
        segtk(*augment, "--augment", "baseline")
        segtk(*augment, "--augment", "cutout", "--resume")
        segtk("bench", "edits", "--models", str(root / "train" / "model.spec"), "--data",
              f"folder:{data}", "--attributes", "color", "--values", "color=red",
              "--executor", "inline", "--out", str(root / "edits"), "--report")
        segtk("report", str(root / "train"))
        segtk("report", str(root / "augment"))
        yield types.SimpleNamespace(home=home, data=data, root=root, train=root / "train",
                                    bench=root / "bench", augment=root / "augment", charts=charts)


def page(run: Path) -> str:
    return (run / "report.html").read_text()


def links(text: str) -> list[str]:
    return [html.unescape(v) for v in re.findall(r'(?:src|href)="([^"]*)"', text)]


def pages(runs) -> list[Path]:
    return sorted(runs.root.rglob("report.html"))


# --- bench attacks after resumes -------------------------------------------------------------


def test_bench_page_covers_every_attack_after_resumes(runs) -> None:
    text = page(runs.bench)
    title = found(r"<h1>(.*?)</h1>", text).group(1)
    assert title == f"Attack benchmark: {', '.join(ATTACKS)} on train/model.spec / folder:data"
    table = text[text.index('class="sortable bench-table"'):]
    table = table[:table.index("</table>")]
    assert re.findall(r"<tr><td>([\w-]+)", table) == ["clean", *ATTACKS]
    assert text.count("<polyline") == len(ATTACKS)  # one curve per attack
    for attack in ATTACKS:
        assert f"<title>{attack}: " in text


def test_bench_outputs_cover_every_attack_after_resumes(runs) -> None:
    """curves.png (via curves.json, written from the same result), table.json and the contact
    sheet the command writes name every attack, not only the last --resume's."""
    curves = json.loads((runs.bench / "curves.json").read_text())
    assert [list(by_attack) for by_attack in curves.values()] == [ATTACKS]
    rows = json.loads((runs.bench / "table.json").read_text())
    assert list(dict.fromkeys(r["attack"] for r in rows)) == ["clean", *ATTACKS]
    legend = runs.charts["bench/curves.png"]
    assert all(a in legend for a in ATTACKS) and "train/model.spec" in legend  # its title
    layout = json.loads(png(runs.bench / "contact_sheet.png").text["segtk:layout"])
    assert layout["columns"] == ["clean", *ATTACKS]


def test_bench_page_has_the_visibility_table(runs) -> None:
    """PSNR, SSIM, changed pixels and ΔE per attack at the largest budget: the mean over the
    records' own visibility of their final images (computed here from results.jsonl)."""
    text = page(runs.bench)
    vis = text[text.index('class="sortable visibility-table"'):]
    vis = vis[:vis.index("</table>")]
    rows = re.findall(r"<tr><td>([\w-]+)(.*?)</tr>", vis, re.S)
    assert [name for name, _ in rows] == ATTACKS
    records = list(read_results(runs.bench / "results.jsonl", key="key").values())
    for name, cells in rows:
        seen = [r["visibility"] for r in records if r["attack"] == name and r["run_budget"] == 4]
        values = re.findall(r'<td class="n"[^>]*>([^<]*)</td>', cells)
        psnr = [v["psnr"] for v in seen if v["psnr"] is not None]  # null: an unchanged image
        assert values[0] == (f"{statistics.fmean(psnr):.2f}" if psnr else "∞")
        assert values[1] == f"{statistics.fmean(v['ssim'] for v in seen):.4f}"
        assert values[2] == f"{100 * statistics.fmean(v['changed'] for v in seen):.2f}"
        assert values[3] == f"{statistics.fmean(v['delta_e'] for v in seen):.2f}"
        assert values[4] == f"{statistics.fmean(v['delta_chroma'] for v in seen):.2f}"


def ink(region: np.ndarray) -> bool:
    """Whether a white band holds text (dark pixels)."""
    return bool((region.min(axis=-1) < 100).any())


@pytest.mark.parametrize("where", ["report_files/contact_sheet.png", "contact_sheet.png"])
def test_contact_sheet_is_labelled(runs, where) -> None:
    """A title band (ε, budget, what the rows are), a header naming each column's attack and a
    band on the left naming each row's image and kind, around the unchanged tiles; the same
    layout in the PNG's text chunks, and on the page next to it."""
    sheet = png(runs.bench / where)
    layout = json.loads(sheet.text["segtk:layout"])
    names = load_dataset(f"folder:{runs.data}").names
    assert layout["columns"] == ["clean", *ATTACKS] and layout["eps"] == 8 and layout["budget"] == 4
    assert layout["rows"] == [f"{n}: {kind}" for n in names
                              for kind in ("adversarial image", "perturbation, amplified")]
    assert "eps = 8" in sheet.text["Description"] and "budget 4 queries" in sheet.text["Description"]
    pixels = np.asarray(sheet.convert("RGB")).astype(int)
    clean = load_dataset(f"folder:{runs.data}")[0].image  # 160 wide: its tile is the image itself
    th, tw = clean.shape[:2]
    hits = [(y, x) for y in range(pixels.shape[0] - th + 1) for x in range(pixels.shape[1] - tw + 1)
            if (pixels[y, x] == clean[0, 0]).all() and (pixels[y:y + th, x:x + tw] == clean).all()]
    y0, x0 = hits[0]  # the clean tile of the first image (the top left of the tiles; an
    # attack that changed nothing has the same tile further right)
    assert pixels.shape == (y0 + 2 * th * len(names), x0 + tw * len(layout["columns"]), 3)
    assert x0 >= 100 and y0 >= 30  # room for the row labels and the title and header
    assert ink(pixels[:y0 - 22]), "no title"
    for col in range(len(layout["columns"])):
        assert ink(pixels[y0 - 22:y0, x0 + col * tw:x0 + (col + 1) * tw]), f"column {col} unlabelled"
    for row in range(2 * len(names)):
        assert ink(pixels[y0 + row * th:y0 + (row + 1) * th, :x0]), f"row {row} unlabelled"
    if where.startswith(FILES_DIR):
        text = page(runs.bench)
        section = text[text.index('id="contact-sheet"'):]
        assert f'src="{where}"' in section and "Columns: clean, " + ", ".join(ATTACKS) in section
        assert "ε = 8, 4 queries" in section and "perturbation, amplified" in section


# --- train and bench augment -----------------------------------------------------------------


def test_train_page_shows_loss_and_val_miou_of_every_epoch(runs, monkeypatch) -> None:
    """Three epochs (two, then a --resume to three): each row's loss from results.jsonl and
    val mIoU of that epoch's checkpoint (scored here with segtk's predict job); a second
    report reads the kept scores and loads no model."""
    assert detect_kind(runs.train) == "train"
    records = sorted(read_results(runs.train / "results.jsonl", key="key").values(),
                     key=lambda r: r["epoch"])
    assert [r["epoch"] for r in records] == [1, 2, 3]
    data = load_dataset(f"folder:{runs.data}")
    expected = []
    for rec in records:
        model = load_segmenter(resolve_spec(rec["spec"], runs.train))
        miou = 100 * predict_dataset(model, data, None)["miou"]
        expected.append((str(rec["epoch"]), f"{rec['loss']:.4f}", f"{miou:.2f}"))

    def shown(text: str) -> list[tuple[str, str, str]]:
        body = text[text.index('class="sortable train-table"'):]
        body = body[body.index("<tbody>"):body.index("</tbody>")]
        return re.findall(r'<tr><td class="n">(\d+)</td><td class="n"[^>]*>([^<]+)</td>\s*'
                          r'<td class="n"[^>]*>([^<]+)</td>', body)

    text = page(runs.train)
    assert shown(text) == expected
    assert text.count('<svg class="chart"') == 2 and text.count("<polyline") == 3  # loss; mIoU, pacc
    assert "has no val split" in text  # a folder dataset: scored on all its images, said so
    monkeypatch.setattr(train_report, "load_segmenter", lambda spec: pytest.fail("scored again"))
    write_report(runs.train)
    assert shown(page(runs.train)) == expected


def test_bench_augment_page_has_every_augmentation_after_a_resume(runs) -> None:
    assert detect_kind(runs.augment) == "bench-augment"
    table = json.loads((runs.augment / "table.json").read_text())
    assert [r["augmentation"] for r in table["rows"]] == ["start", "baseline", "cutout"]
    text = page(runs.augment)
    assert re.search(r"<h1>Augmentation benchmark: baseline, cutout from demo / folder:data</h1>", text)
    body = text[text.index('class="sortable bench-augment-table"'):]
    body = body[body.index("<tbody>"):body.index("</tbody>")]
    rows = re.findall(r"<tr><td>([\w-]+)</td>.*?</tr>", body, re.S)
    assert rows == ["start", "baseline", "cutout"]
    for row, shown in zip(table["rows"], re.findall(r"<tr>.*?</tr>", body, re.S)):
        cells = re.findall(r'<td class="n[^"]*" data-v="[^"]*">([^<]+)</td>', shown)
        subsets = [f"{row['miou'][s]:.2f}" for s in table["subsets"]]
        assert cells[:len(subsets)] == subsets
        assert cells[len(subsets) + 1] == f"{row['mr_appearance']:.3f}"
    assert text.count("<rect x=") >= 3 * len(table["subsets"])  # a bar per model and subset
    for label in ("baseline", "cutout"):
        assert f'href="train/{label}/report.html"' in text
        assert detect_kind(runs.augment / "train" / label) == "train"
    assert 'href="edits/color/report.html"' in text


def test_a_report_says_each_page_it_builds_sub_runs_first(runs) -> None:
    """`segtk report` shows which page it is at: a train page scores every epoch's checkpoint."""
    built: list[str] = []
    write_report(runs.augment, on_page=lambda run: built.append(run.relative_to(runs.augment).as_posix()))
    assert built == ["edits/color", "train/baseline", "train/cutout", "."]


# --- every page ------------------------------------------------------------------------------


def test_every_new_page_exists_and_links_only_existing_files(runs) -> None:
    found = {p.parent.relative_to(runs.root).as_posix() for p in pages(runs)}
    assert found >= {"train", "bench", "augment", "augment/train/baseline",
                     "augment/train/cutout", "augment/edits/color"}
    for report in pages(runs):
        text = report.read_text()
        assert not re.search(r"(?:src|href)=\"(?:https?:|//|/)", text)
        for link in links(text):
            assert (report.parent / unquote(link)).is_file(), (report, link)


def text_chunks(path: Path) -> str:
    with png(path) as image:
        return " ".join(f"{k} {v}" for k, v in image.text.items())


def test_no_page_or_chart_names_an_absolute_path(runs) -> None:
    """The run folders' absolute paths and the home folder (which holds the runs, the data
    and the model spec, all given to the CLI as absolute paths) appear in no page, SVG chart,
    PNG text chunk or text a chart draws."""
    secret = [str(runs.root), str(runs.home), str(runs.home.resolve())]
    checked = 0
    for path in sorted(runs.root.rglob("*")):
        if path.suffix in (".html", ".svg"):
            text = path.read_text()
        elif path.suffix == ".png" and "checkpoints" not in path.parts:
            text = text_chunks(path)
        else:
            continue
        checked += 1
        for s in secret:
            assert s not in text, (path, s)
    assert checked > 20
    assert {"bench/curves.png", "augment/miou.png", "edits/miou.png"} <= set(runs.charts)
    assert "train/model.spec" in runs.charts["edits/miou.png"]  # the bench edits legend
    for name, texts in runs.charts.items():
        for s in secret:
            assert not any(s in t for t in texts), (name, s)
    text = page(runs.bench)  # and the command and settings read as from the run folder
    assert "--out ." in text and "folder:../../data" in text and "../train/model.spec" in text


# --- in a real browser -----------------------------------------------------------------------

CHROMIUM = shutil.which("chromium")


def chromium(tmp_path: Path, *args: str) -> str:
    """Headless Chromium with a fresh profile: its stdout (e.g. --dump-dom's DOM)."""
    assert CHROMIUM is not None
    done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update",
                           "--disable-sync", "--hide-scrollbars",
                           f"--user-data-dir={tmp_path / 'profile'}", *args],
                          capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium)")
@pytest.mark.parametrize("where, images, tables, charts", [
    ("bench", 1, 3, 1), ("train", 0, 1, 2), ("augment", 0, 1, 1), ("augment/train/cutout", 0, 1, 2),
])
def test_browser_loads_every_new_page(runs, where, images, tables, charts, tmp_path) -> None:
    out = chromium(tmp_path, "--dump-dom", (runs.root / where / "report.html").resolve().as_uri())
    body = dict(re.findall(r'data-([\w-]+)="([^"]*)"', found(r"<body([^>]*)>", out).group(1)))
    assert body["images"] == f"{images}/{images}" and body["images-ok"] == "yes"
    assert out.count("<table") == tables and out.count('<svg class="chart"') == charts
    assert re.search(r'<div[^>]*id="broken"[^>]*hidden', out)  # no "pictures missing" banner


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium)")
@pytest.mark.parametrize("where", ["train", "augment"])
def test_browser_screenshot_shows_the_styled_page_and_its_chart(runs, where, tmp_path) -> None:
    """What bench/report_screenshots.py shows of the train and bench-augment pages: the styled
    page (the dark header: the CSS applied) with its chart drawn in the series' colours."""
    png = tmp_path / f"{where}.png"
    chromium(tmp_path, f"--screenshot={png}", "--window-size=1280,2000",
             (runs.root / where / "report.html").resolve().as_uri())
    shot = np.asarray(Image.open(png).convert("RGB")).astype(int)
    assert shot.shape == (2000, 1280, 3)
    assert np.abs(shot[20, 20] - [0x17, 0x21, 0x2F]).max() <= 3  # the dark header: CSS applied
    first = np.array([int(SERIES_COLOURS[0][i:i + 2], 16) for i in (1, 3, 5)])
    drawn = (np.abs(shot - first).max(axis=2) <= 8).sum()
    assert drawn >= 100, f"the chart's first series is not on the page ({drawn} pixels)"

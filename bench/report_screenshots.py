"""Screenshots of the three `segtk report` pages (attack, bench, edit) with headless Chromium.

Makes small runs on the bundled demo model and images, writes their reports and saves
docs/images/report_attack.png, report_bench.png and report_edit.png (1280×2000 viewport):

    OMP_NUM_THREADS=1 python bench/report_screenshots.py [--out docs/images] [--keep DIR]

The edit run comes from `segtk edit --plugin color` where that command exists, else it is
written by hand in its layout. Needs /usr/bin/chromium (Debian: apt-get install chromium);
about a minute on two busy cores.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from segtk.core.data import write_png
from segtk.core.report import write_report
from segtk.core.runs import versions
from segtk.core.specs import load_dataset

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars"]


def segtk(*args: str) -> None:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    exe = shutil.which("segtk")
    subprocess.run([exe, *args] if exe else [sys.executable, "-m", "segtk.cli", *args], check=True,
                   env=env)


def screenshot(chromium: str, page: Path, png: Path, size: str = "1280,2000") -> None:
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                        f"--screenshot={png}", f"--window-size={size}", page.resolve().as_uri()],
                       check=True, timeout=120, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def edit_run(out: Path) -> None:
    """A `segtk edit` run on the demo images, or (without the edit command) one written by hand
    in its layout."""
    if subprocess.run([shutil.which("segtk") or "segtk", "edit", "--help"],
                      capture_output=True).returncode == 0:
        segtk("edit", "--plugin", "color", "--values", "red,blue,green", "--min-area", "0.1",
              "--limit", "5", "--out", str(out))
    else:
        write_edit_run(out)


def write_edit_run(root: Path, data_spec: str = "demo", images: int = 3) -> Path:
    """images/, labels/, masks/, source/, classes.txt, manifest.jsonl, run.json, contact sheet."""
    data = load_dataset(data_spec, limit=images)
    root.mkdir(parents=True, exist_ok=True)
    (root / "classes.txt").write_text("\n".join(data.classes) + "\n")
    values = ["red", "blue"]
    manifest, sheet_rows = [], []
    for item in data:
        write_png(root / "source" / "images" / f"{item.name}.png", item.image)
        row = [item.image]
        for value in values:
            image, mask, cls = recolour(item.image, item.label, data.classes, value)
            name = f"{item.name}__{value}"
            write_png(root / "images" / f"{name}.png", image)
            write_png(root / "labels" / f"{name}.png", item.label.astype(np.uint8), data.palette)
            write_png(root / "masks" / f"{name}.png", (mask * 255).astype(np.uint8))
            manifest.append({"name": name, "source": item.name, "value": value, "variant": 0,
                             "attribute": "color", "editor": "color", "kind": "appearance",
                             "level": "object", "class": cls,
                             "object_area": round(float(mask.mean()), 5),
                             "prompt": f"a photo of a {value} {cls}", "backend": "classical"})
            row.append(image)
        sheet_rows.append(row)
    (root / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in manifest))
    contact_sheet(sheet_rows, ["original", *values], root / "contact_sheet.png")
    config = {"plugin": "color", "values": values, "backend": "classical", "data": data_spec,
              "split": None, "limit": images, "seed": 0}
    command = f"segtk edit --plugin color --values {','.join(values)} --limit {images} --out {root}"
    (root / "run.json").write_text(json.dumps({"command": command, "versions": versions(),
                                               "config": config}, indent=2) + "\n")
    return root


def recolour(image: np.ndarray, label: np.ndarray, classes: list[str], value: str):
    """The largest class that is not sky or road, tinted (luminance kept)."""
    counts = np.bincount(label[label < len(classes)].ravel(), minlength=len(classes))
    cls = max((i for i, c in enumerate(classes) if c not in ("sky", "road")), key=lambda i: counts[i])
    mask = label == cls
    grey = image.astype(np.float32).mean(-1, keepdims=True)
    tint = np.array([235, 40, 40]) if value == "red" else np.array([40, 80, 235])
    out = np.where(mask[..., None], grey / 255 * tint * 1.3, image)
    return out.clip(0, 255).astype(np.uint8), mask, classes[cls]


def contact_sheet(rows: list[list[np.ndarray]], titles: list[str], path: Path) -> None:
    h, w = rows[0][0].shape[:2]
    pad, head = 6, 22
    sheet = Image.new("RGB", (len(titles) * (w + pad) + pad, head + len(rows) * (h + pad) + pad),
                      (255, 255, 255))
    draw = ImageDraw.Draw(sheet)
    for j, title in enumerate(titles):
        draw.text((pad + j * (w + pad) + 4, 5), title, fill=(40, 40, 40))
    for i, row in enumerate(rows):
        for j, image in enumerate(row):
            sheet.paste(Image.fromarray(image), (pad + j * (w + pad), head + i * (h + pad)))
    sheet.save(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "docs" / "images"))
    parser.add_argument("--keep", default=None, help="Make the runs here and keep them.")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.keep or tempfile.mkdtemp(prefix="segtk-report-shots-"))
    for sub in ("attack", "bench", "edit"):
        shutil.rmtree(work / sub, ignore_errors=True)
    segtk("attack", "--plugin", "dla", "--out", str(work / "attack"), "--report")
    segtk("bench", "attacks", "--attacks", "dla,random,square,simba", "--budgets", "5,10,20",
          "--repeats", "2", "--limit", "4", "--out", str(work / "bench"), "--report")
    edit_run(work / "edit")
    write_report(work / "edit")
    for kind in ("attack", "bench", "edit"):
        png = out / f"report_{kind}.png"
        screenshot(args.chromium, work / kind / "report.html", png)
        print(f"wrote {png}")
    if not args.keep:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()

"""Screenshots of the six `segtk report` pages with headless Chromium.

Makes small runs on the bundled demo model and images (attack, attack benchmark, edit, edit
benchmark, training, augmentation benchmark), writes their reports and saves
docs/images/report_{attack,bench,edit,bench_edits,train,bench_augment}.png (1280×2000 viewport):

    OMP_NUM_THREADS=1 python bench/report_screenshots.py [--out docs/images] [--keep DIR]

Needs /usr/bin/chromium (Debian: apt-get install chromium); a minute or two on two cores.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "docs" / "images"))
    parser.add_argument("--keep", default=None, help="Make the runs here and keep them.")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.keep or tempfile.mkdtemp(prefix="segtk-report-shots-"))
    kinds = ("attack", "bench", "edit", "bench_edits", "train", "bench_augment")
    for sub in kinds:
        shutil.rmtree(work / sub, ignore_errors=True)
    segtk("attack", "--plugin", "dla", "--out", str(work / "attack"), "--report")
    segtk("bench", "attacks", "--attacks", "dla,random,square,simba", "--budgets", "5,10,20",
          "--repeats", "2", "--limit", "4", "--out", str(work / "bench"), "--report")
    segtk("edit", "--plugin", "color", "--values", "red,blue,green", "--min-area", "0.1",
          "--limit", "5", "--out", str(work / "edit"), "--report")
    segtk("bench", "edits", "--attributes", "color,style,size", "--values", "color=red,blue",
          "--values", "style=cartoon", "--limit", "4", "--out", str(work / "bench_edits"), "--report")
    segtk("train", "--model", "demo", "--data", "demo", "--augment", "cutmix", "--epochs", "3",
          "--crop", "96x64", "--out", str(work / "train"))
    segtk("bench", "augment", "--model", "demo", "--data", "demo", "--augment", "baseline,cutmix",
          "--attributes", "color", "--values", "color=red,blue", "--epochs", "2", "--crop", "96x64",
          "--out", str(work / "bench_augment"))
    for kind in ("train", "bench_augment"):  # these commands have no --report
        segtk("report", str(work / kind))
    for kind in kinds:
        png = out / f"report_{kind}.png"
        screenshot(args.chromium, work / kind / "report.html", png)
        print(f"wrote {png}")
    if not args.keep:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()

"""`segtk report`: one offline HTML page per run directory, which shows the folder's pictures.

The page is RUN_DIR/report.html. Pictures it needs that the run did not store (the clean image,
the amplified perturbation, the label, edit masks) are written to RUN_DIR/report_files/, and
every link is relative: the page works inside its run folder, which can be zipped and shared as
it is (report.html alone shows no pictures). Charts are inline
SVG; the only script sorts tables and flags images that failed to load.

Six kinds of run have a page; run.json records which one a folder holds (storage.runs.RunDir):
- attack (`segtk attack`): summary recomputed from the confusions, proxy-vs-queries curve,
  per-image rows (clean | adversarial | perturbation | predictions | label);
- bench-attacks (`segtk bench attacks`): the attack × budget table (mean ± std), the visibility
  table (PSNR, SSIM, changed pixels, OKLab ΔE), the curves and a labelled contact sheet, for
  every attack the run's records hold (whichever --resume added it);
- edit (`segtk edit`): the contact sheet, a per-attribute table and the edited images;
- bench-edits (`segtk bench edits`): mIoU per subset per model, RmIoU and mR per group, the bar
  chart, and links to each edited subset's own (edit) report, which is written too;
- train (`segtk train`): loss and validation mIoU per epoch (each checkpoint scored on the
  validation data), a table and charts;
- bench-augment (`segtk bench augment`): mIoU per subset and mR per augmentation, a bar chart,
  and links to each augmentation's training report and each edited subset's report.

The page of each kind is built by its module (reports.attack, reports.bench_attacks,
reports.edit, reports.bench_edits, reports.train, reports.bench_augment) from the pieces in
reports.common. No page or picture names an absolute path: printed text is shown relative to
the run folder (reports.common.relative_paths), titles use brief model and data names.
"""


from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from segtk.core import SegtkError, atomic_write_bytes
from segtk.reports.attack import attack_context
from segtk.reports.bench_attacks import bench_context
from segtk.reports.bench_augment import bench_augment_context, train_dirs
from segtk.reports.bench_edits import bench_edits_context, edit_subset_dirs
from segtk.reports.common import (
    FILES_DIR,
    REPORT_FILE,
    TEMPLATES,
    _common_context,
    _environment,
    _note,
)
from segtk.reports.edit import edit_context
from segtk.reports.train import train_context
from segtk.storage import layout
from segtk.storage.runs import command_of, load_run_file

__all__ = ["FILES_DIR", "REPORT_FILE", "TEMPLATES", "detect_kind", "read_run_json", "report_of",
           "write_report"]

BUILDERS = {"attack": attack_context, "bench-attacks": bench_context, "edit": edit_context,
            "bench-edits": bench_edits_context, "train": train_context,
            "bench-augment": bench_augment_context}
PAGES = {"attack": "attack.html.j2", "bench-attacks": "bench.html.j2", "edit": "edit.html.j2",
         "bench-edits": "bench_edits.html.j2", "train": "train.html.j2",
         "bench-augment": "bench_augment.html.j2"}
COMMANDS = ", ".join(f"segtk {command_of(k)}" for k in list(BUILDERS)[:-1]) + \
    f" or segtk {command_of(list(BUILDERS)[-1])}"
# Runs made of runs: each sub-run gets its own page, linked from the run's, written first.
SUBRUNS = {"bench-edits": edit_subset_dirs,
           "bench-augment": lambda run: [*edit_subset_dirs(run), *train_dirs(run)]}


def write_report(run_dir: str | Path, data_spec: str | None = None,
                 on_page: Callable[[Path], None] | None = None) -> Path:
    """Write RUN_DIR/report.html (and RUN_DIR/report_files/); return the page's path.

    data_spec overrides the dataset named in run.json (e.g. when the run was made from another
    working directory and its relative --data path no longer resolves). `on_page(run)` is
    called before each page is built, sub-runs' first: a train run's page scores every epoch's
    checkpoint, which takes minutes on a CPU, so the CLI shows which page it is at.
    """
    run = Path(run_dir)
    if not run.is_dir():
        raise SegtkError(f"{run}: run directory not found",
                         hint=f"pass the --out folder of {COMMANDS}")
    kind = detect_kind(run)
    meta = read_run_json(run)
    shutil.rmtree(run / FILES_DIR, ignore_errors=True)  # ours alone: rebuilt every time
    build = BUILDERS[kind]
    context = _common_context(run, meta, kind)
    if kind in SUBRUNS:  # each sub-run gets its own page, linked from this one
        for sub in SUBRUNS[kind](run):
            try:
                write_report(sub, data_spec, on_page)
            except SegtkError as exc:
                _note(context["notes"], f"No report for {sub.name}: {exc.message}", "warn")
    if on_page:
        on_page(run)
    context.update(build(run, meta, data_spec, context["notes"]))
    html = _environment().get_template(PAGES[kind]).render(**context)
    atomic_write_bytes(run / REPORT_FILE, html.encode())
    return run / REPORT_FILE


def report_of(run_dir: str | Path, asked: bool, resumed: bool) -> Path | None:
    """The report a command writes at its end: when asked (--report), and on --resume when the
    run folder holds one already (its page would otherwise describe the run before the
    resume). None when it writes none."""
    if asked or (resumed and (Path(run_dir) / REPORT_FILE).is_file()):
        return write_report(run_dir)
    return None


def read_run_json(run: Path) -> dict[str, Any]:
    """RUN_DIR/run.json ({} if there is none); a torn or foreign one is an error naming the fix."""
    return load_run_file(run / layout.RUN) or {}


def detect_kind(run: Path) -> str:
    """The kind of run in `run` (a key of BUILDERS: "attack", "bench-attacks", …), as its
    run.json records it. No guessing from the files: a folder without a recorded kind is an
    error saying how to get one (a run.json from before kinds gets it on --resume)."""
    meta = read_run_json(run)
    if not meta:
        raise SegtkError(
            f"{run}: not a segtk run directory (no {layout.RUN})",
            hint=f"point segtk report at the --out folder of {COMMANDS}",
        )
    kind = meta.get("kind")
    if kind is None:
        raise SegtkError(
            f"{run / layout.RUN} does not say which command made it (written before segtk "
            "recorded run kinds)",
            hint="rerun that command with the same options and --resume (finished work is "
                 f"kept; {layout.RUN} gets its kind), then segtk report again",
        )
    if kind == "evaluate":  # its page is the card, which segtk evaluate writes itself
        raise SegtkError(
            f"{run}: a `segtk evaluate` run; its page is {run / 'card.html'}",
            hint="open card.html (segtk evaluate … --resume rewrites it); each sub-run has a "
                 f"report of its own: segtk report {run / 'black-box'} (or white-box, edits)",
        )
    if kind not in BUILDERS:
        raise SegtkError(f"{run}: segtk report has no page for `segtk {command_of(kind)}` runs",
                         hint=f"it reports the runs of {COMMANDS.replace(' or ', ' and ')}")
    return kind

"""`segtk report`: one self-contained, offline HTML page per run directory.

The page is RUN_DIR/report.html. Pictures it needs that the run did not store (the clean image,
the amplified perturbation, the label, edit masks) are written to RUN_DIR/report_files/, and
every link is relative, so the run folder can be zipped and shared as it is. Charts are inline
SVG; the only script sorts tables and flags images that failed to load.

Four kinds of run are recognised from run.json's config, or from the files present:
- attack (`segtk attack`): summary recomputed from the confusions, proxy-vs-queries curve,
  per-image rows (clean | adversarial | perturbation | predictions | label);
- bench (`segtk bench attacks`): the attack × budget table (mean ± std) and the curves;
- edit (`segtk edit`): the contact sheet, a per-attribute table and the edited images;
- bench-edits (`segtk bench edits`): mIoU per subset per model, RmIoU and mR per group, the bar
  chart, and links to each edited subset's own (edit) report, which is written too.

The page of each kind is built by its module (report_attack, report_bench, report_edit,
report_bench_edits) from the pieces in report_common.
"""


from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from segtk.core.data import atomic_write_bytes
from segtk.core.errors import SegtkError
from segtk.reports.attack import attack_context
from segtk.reports.bench_attacks import bench_context
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
from segtk.core.runs import RESULTS_FILE, RUN_FILE

__all__ = ["FILES_DIR", "REPORT_FILE", "TEMPLATES", "detect_kind", "read_run_json", "write_report"]

EDIT_KEYS = ("editor", "editors", "attribute", "attributes")
BUILDERS = {"attack": attack_context, "bench": bench_context, "edit": edit_context,
            "bench-edits": bench_edits_context}


def write_report(run_dir: str | Path, data_spec: str | None = None) -> Path:
    """Write RUN_DIR/report.html (and RUN_DIR/report_files/); return the page's path.

    data_spec overrides the dataset named in run.json (e.g. when the run was made from another
    working directory and its relative --data path no longer resolves).
    """
    run = Path(run_dir)
    if not run.is_dir():
        raise SegtkError(f"{run}: run directory not found",
                         hint="pass the --out folder of segtk attack, segtk bench attacks, segtk edit "
                              "or segtk bench edits")
    kind = detect_kind(run)
    meta = read_run_json(run)
    shutil.rmtree(run / FILES_DIR, ignore_errors=True)  # ours alone: rebuilt every time
    build = BUILDERS[kind]
    context = _common_context(run, meta, kind)
    if kind == "bench-edits":  # each edited subset gets its own page, linked from this one
        for sub in edit_subset_dirs(run):
            try:
                write_report(sub, data_spec)
            except SegtkError as exc:
                _note(context["notes"], f"No report for {sub.name}: {exc.message}", "warn")
    context.update(build(run, meta, data_spec, context["notes"]))
    template = f"{kind.replace('-', '_')}.html.j2"
    html = _environment().get_template(template).render(**context)
    atomic_write_bytes(run / REPORT_FILE, html.encode())
    return run / REPORT_FILE


def read_run_json(run: Path) -> dict[str, Any]:
    path = run / RUN_FILE
    if not path.is_file():
        return {}
    try:
        meta = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SegtkError(f"{path}: not valid JSON ({exc})",
                         hint="run.json is written by segtk; rerun the command to rewrite it") from exc
    return meta if isinstance(meta, dict) else {}


def detect_kind(run: Path) -> str:
    """'attack', 'bench', 'edit' or 'bench-edits', from run.json's config, else from the files present."""
    config = read_run_json(run).get("config") or {}
    if "models" in config and "attributes" in config:
        return "bench-edits"
    if "attacks" in config and "budgets" in config:
        return "bench"
    if "attack" in config:
        return "attack"
    if (any(k in config for k in EDIT_KEYS) or {"plugin", "values"} <= set(config)
            or (run / "manifest.jsonl").is_file() or (run / "skipped.jsonl").is_file()):
        return "edit"
    first = _first_record(run / RESULTS_FILE)
    if _bench_edits_table(run) or (first is not None and "subset" in first
                                   and (run / "edits").is_dir()):
        return "bench-edits"
    if first is not None:
        return "bench" if "key" in first else "attack"
    if (run / "images").is_dir() and (run / "labels").is_dir():
        return "edit"
    raise SegtkError(
        f"{run}: not a segtk run directory (no run.json config, results.jsonl or manifest.jsonl)",
        hint="point segtk report at the --out folder of segtk attack, segtk bench attacks, "
             "segtk edit or segtk bench edits",
    )


def _bench_edits_table(run: Path) -> bool:
    """table.json as segtk bench edits writes it (miou per model and subset, RmIoU/mR groups)."""
    path = run / "table.json"
    if not path.is_file():
        return False
    try:
        table = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False
    return isinstance(table, dict) and "subsets" in table and "groups" in table


def _first_record(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    with open(path, "rb") as fh:
        line = fh.readline()
    try:
        rec = json.loads(line)
    except json.JSONDecodeError:
        return None
    return rec if isinstance(rec, dict) else None


"""Pieces shared by the report pages of every kind of run (see segtk.reports.writer)."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
from jinja2 import Environment, FileSystemLoader, StrictUndefined, pass_context
from jinja2.runtime import Context
from markupsafe import Markup, escape

from segtk.core import Dataset, SegtkError, load_dataset, write_png
from segtk.core._data import default_palette
from segtk.core._specs import split_spec
from segtk.storage import layout
from segtk.storage.runs import read_results

REPORT_FILE = layout.REPORT  # the names the report modules import
FILES_DIR = layout.REPORT_FILES
TEMPLATES = Path(__file__).resolve().parent / "templates"


RUN_DIR = "run_dir"  # the context key holding the run folder's absolute path

# An absolute POSIX path in text: a '/' that starts a word (not '//' of a URL, not 'a/b').
_ABSOLUTE = re.compile(r"(?<![\w.~/-])/(?![/\s])[^\s:,;=\"'<>()|]+")


@lru_cache(maxsize=1)
def _environment():
    """Every value a template prints passes `_finalize` (absolute paths made relative)."""
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                      finalize=_finalize)
    env.filters["num"] = _num
    env.filters["wbr"] = _wbr
    return env


def shown_path(path: str, run: Path) -> str:
    """An absolute path as a page shows it: relative to the run folder (so the page names no
    folder of the machine that made it), or under ~ where that relative path would pass
    through the home folder."""
    target, base, home = Path(path), run.resolve(), Path.home().resolve()
    try:
        return target.relative_to(base).as_posix() or "."
    except ValueError:
        pass
    inside_home = home != Path(home.anchor) and home in (target, *target.parents)
    if inside_home and home not in (base, *base.parents):
        return "~/" + target.relative_to(home).as_posix()
    return Path(os.path.relpath(target, base)).as_posix()


def relative_paths(text: str, run: Path) -> str:
    """`text` with every absolute path in it shown relative to the run folder (`shown_path`)."""
    return _ABSOLUTE.sub(lambda m: shown_path(m.group(0), run), text)


@pass_context
def _finalize(context: Context, value: Any) -> Any:
    """Plain text printed by a template, its absolute paths relative to the run folder (markup
    such as the charts is ours and holds none)."""
    run = context.get(RUN_DIR)
    if run and isinstance(value, str) and not isinstance(value, Markup) and "/" in value:
        return relative_paths(value, Path(run))
    return value


@pass_context
def _wbr(context: Context, text: Any):
    """Escaped text with line-break opportunities after _ / - . (long image names)."""
    shown = _finalize(context, str(text))
    return Markup(re.sub(r"([_/.-]+)", r"\1<wbr>", str(escape(shown))))


def _num(value: Any, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _common_context(run: Path, meta: dict[str, Any], kind: str) -> dict[str, Any]:
    versions = {str(k): str(v) for k, v in (meta.get("versions") or {}).items()}
    main = [(k, versions.pop(k)) for k in ("segtk", "torch", "python") if k in versions]
    command = str(meta.get("command") or "")
    return {
        "kind": kind,
        "run_name": run.resolve().name,
        RUN_DIR: str(run.resolve()),
        "generated": datetime.now().strftime("%Y-%m-%d %H:%M"),
        "command": _short_command(command),
        "command_full": command,
        "versions": main,
        "plugin_versions": sorted(versions.items()),
        "config": _flatten(meta.get("config") or {}),
        "notes": [],
    }


def _short_command(command: str) -> str:
    """'/long/path/bin/segtk attack ...' -> 'segtk attack ...'."""
    head, _, rest = command.partition(" ")
    if head.endswith("/segtk") or head.endswith("\\segtk") or head.endswith("segtk.exe"):
        return f"segtk {rest}".strip()
    return command


def _flatten(config: dict[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            rows.extend(_flatten(value, f"{name}."))
        elif isinstance(value, list):
            shown = ", ".join(str(v) for v in value[:12])
            rows.append((name, shown + (f", … ({len(value)} in all)" if len(value) > 12 else "")))
        else:
            rows.append((name, "–" if value is None else str(value)))
    return rows


def finished_records(run: Path) -> list[dict[str, Any]]:
    """A benchmark's finished records, or the one-line error that there are none yet."""
    records = list(read_results(run / layout.RESULTS, key="key").values())
    if not records:
        raise SegtkError(f"{run}: no finished records in {layout.RESULTS} yet",
                         hint="run the benchmark (or continue it with --resume) first")
    return records


def _note(notes: list[dict[str, str]], text: str, level: str = "info") -> None:
    notes.append({"level": level, "text": text})


def _load_dataset(spec: str | None, split: str | None, run: Path | None = None,
                  notes: list[dict[str, str]] | None = None) -> tuple[Dataset | None, str]:
    """The run's dataset, or None and why not (a report never fails for want of it).

    A relative PATH in FORMAT:PATH is relative to where the run was started, which run.json
    does not record: where it does not resolve from here, the folders above the run directory
    are tried too (a run in REPO/runs/x made from REPO is found from anywhere).
    """
    if not spec:
        return None, f"{layout.RUN} names no dataset"

    def attempt(candidate: str) -> tuple[Dataset | None, str]:
        try:
            # (images without labels too: a label-free attack's run shows them)
            return load_dataset(candidate, split, unlabelled=True), ""
        except SegtkError as exc:
            return None, exc.message
        except Exception as exc:  # a third-party reader may raise anything
            return None, f"{type(exc).__name__}: {exc}"

    dataset, why = attempt(spec)
    name, arg = split_spec(spec)
    if dataset is not None or run is None or not arg or Path(arg).is_absolute() or Path(arg).exists():
        return dataset, why
    for base in list(run.resolve().parents)[:4]:
        if (base / arg).exists():
            found, _ = attempt(f"{name}:{base / arg}")
            if found is not None:
                if notes is not None:
                    _note(notes, f"The dataset {spec} was found at {base / arg} (relative to {base}).")
                return found, ""
    return dataset, why


def _classes_and_palette(dataset: Dataset | None, k: int) -> tuple[list[str], np.ndarray]:
    if dataset is not None and len(dataset.classes) == k:
        classes = list(dataset.classes)
        if dataset.palette is not None and len(dataset.palette) >= k:
            return classes, np.asarray(dataset.palette, dtype=np.uint8)
        return classes, default_palette(k)
    return [f"class {i}" for i in range(k)], default_palette(k)


def _hex(colour: Sequence[int]) -> str:
    return "#{:02x}{:02x}{:02x}".format(*(int(c) for c in colour[:3]))


def _legend(classes: list[str], palette: np.ndarray, clean_iou: list[float] | None = None,
            adv_iou: list[float] | None = None) -> list[dict[str, Any]]:
    out = []
    for i, name in enumerate(classes):
        entry: dict[str, Any] = {"id": i, "name": name, "colour": _hex(palette[i])}
        if clean_iou is not None and adv_iou is not None:
            c, a = 100 * clean_iou[i], 100 * adv_iou[i]
            entry.update(clean=c, adv=a, drop=c - a if math.isfinite(c) and math.isfinite(a) else None,
                         clean_w=f"{c:.1f}" if math.isfinite(c) else "0",
                         adv_w=f"{a:.1f}" if math.isfinite(a) else "0")
        out.append(entry)
    return out


def _href(path: str) -> str:
    return quote(path, safe="/")


def _derived(run: Path, folder: str, name: str, array: np.ndarray) -> str:
    """Write report_files/FOLDER/NAME.png; return its link relative to report.html."""
    rel = f"{FILES_DIR}/{folder}/{name}.png"
    write_png(run / rel, array)
    return _href(rel)


def _picture(href: str | None, shape: Sequence[int] | None, caption: str = "") -> dict[str, Any] | None:
    if href is None:
        return None
    h, w = (int(shape[0]), int(shape[1])) if shape is not None else (0, 0)
    return {"src": href, "width": w, "height": h, "caption": caption}


def _spread(histories: list[list[float]]) -> dict[str, list[float]]:
    """Per query: mean, quartiles and range over images (%), histories padded with their last value."""
    histories = [h for h in histories if h]
    if not histories:
        return {}
    length = max(len(h) for h in histories)
    cols = np.array([h + [h[-1]] * (length - len(h)) for h in histories], dtype=np.float64) * 100
    return {
        "mean": cols.mean(0).tolist(),
        "q25": np.percentile(cols, 25, axis=0).tolist(),
        "q75": np.percentile(cols, 75, axis=0).tolist(),
        "min": cols.min(0).tolist(),
        "max": cols.max(0).tolist(),
    }

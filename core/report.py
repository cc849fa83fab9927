"""`segtk report`: one self-contained, offline HTML page per run directory.

The page is RUN_DIR/report.html. Pictures it needs that the run did not store (the clean image,
the amplified perturbation, the label, edit masks) are written to RUN_DIR/report_files/, and
every link is relative, so the run folder can be zipped and shared as it is. Charts are inline
SVG; the only script sorts tables and flags images that failed to load.

Three kinds of run are recognised from run.json's config, or from the files present:
- attack (`segtk attack`): summary recomputed from the confusions, proxy-vs-queries curve,
  per-image rows (clean | adversarial | perturbation | predictions | label);
- bench (`segtk bench attacks`): the attack × budget table (mean ± std) and the curves;
- edit (`segtk edit`): the contact sheet, a per-attribute table and the edited images.
"""

from __future__ import annotations

import json
import math
import shutil
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np

from segtk.core.data import (
    IMAGE_SUFFIXES,
    Dataset,
    atomic_write_bytes,
    default_palette,
    read_image,
    read_label,
    write_png,
)
from segtk.core.errors import SegtkError
from segtk.core.render import amplify, overlay
from segtk.core.report_svg import SERIES_COLOURS, Series, line_chart
from segtk.core.runs import RESULTS_FILE, RUN_FILE, read_results

REPORT_FILE = "report.html"
FILES_DIR = "report_files"
TEMPLATES = Path(__file__).resolve().parent / "templates"
EDIT_KEYS = ("editor", "editors", "attribute", "attributes")


def write_report(run_dir: str | Path, data_spec: str | None = None) -> Path:
    """Write RUN_DIR/report.html (and RUN_DIR/report_files/); return the page's path.

    data_spec overrides the dataset named in run.json (e.g. when the run was made from another
    working directory and its relative --data path no longer resolves).
    """
    run = Path(run_dir)
    if not run.is_dir():
        raise SegtkError(f"{run}: run directory not found",
                         hint="pass the --out folder of segtk attack, segtk bench attacks or segtk edit")
    kind = detect_kind(run)
    meta = read_run_json(run)
    shutil.rmtree(run / FILES_DIR, ignore_errors=True)  # ours alone: rebuilt every time
    build = {"attack": _attack_context, "bench": _bench_context, "edit": _edit_context}[kind]
    context = _common_context(run, meta, kind)
    context.update(build(run, meta, data_spec, context["notes"]))
    html = _environment().get_template(f"{kind}.html.j2").render(**context)
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
    """'attack', 'bench' or 'edit', from run.json's config, else from the files present."""
    config = read_run_json(run).get("config") or {}
    if "attacks" in config and "budgets" in config:
        return "bench"
    if "attack" in config:
        return "attack"
    if (any(k in config for k in EDIT_KEYS) or {"plugin", "values"} <= set(config)
            or (run / "manifest.jsonl").is_file() or (run / "skipped.jsonl").is_file()):
        return "edit"
    first = _first_record(run / RESULTS_FILE)
    if first is not None:
        return "bench" if "key" in first else "attack"
    if (run / "images").is_dir() and (run / "labels").is_dir():
        return "edit"
    raise SegtkError(
        f"{run}: not a segtk run directory (no run.json config, results.jsonl or manifest.jsonl)",
        hint="point segtk report at the --out folder of segtk attack, segtk bench attacks or segtk edit",
    )


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


# --- shared pieces ----------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _environment():
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = _num
    env.filters["wbr"] = _wbr
    return env


def _wbr(text: Any):
    """Escaped text with line-break opportunities after _ / - . (long image names)."""
    import re

    from markupsafe import Markup, escape

    return Markup(re.sub(r"([_/.-]+)", r"\1<wbr>", str(escape(str(text)))))


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
        "run_path": str(run.resolve()),
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


def _brief(spec: Any) -> str:
    """A spec for a title: folders dropped ('camvid:../data/camvid' -> 'camvid:camvid')."""
    import re

    return re.sub(r"[^\s:=,;]*[/\\]", "", str(spec).rstrip("/\\")) if spec else "?"


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
        return None, "run.json names no dataset"
    from segtk.core.specs import load_dataset, split_spec

    def attempt(candidate: str) -> tuple[Dataset | None, str]:
        try:
            return load_dataset(candidate, split), ""
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


# --- attack runs ------------------------------------------------------------------------------


def _attack_context(run: Path, meta: dict[str, Any], data_spec: str | None,
                    notes: list[dict[str, str]]) -> dict[str, Any]:
    from segtk.core.attack_job import summarise
    from segtk.core.metrics import iou_per_class

    records = list(read_results(run / RESULTS_FILE).values())
    if not records:
        raise SegtkError(f"{run}: no finished images in {RESULTS_FILE} yet",
                         hint="run the attack (or continue it with --resume) first")
    config = meta.get("config") or {}
    params = config.get("params") or {}
    k = len(records[0]["clean_confusion"])
    summary = summarise(records, k)
    table = summary.table
    spec = data_spec or config.get("data")
    dataset, why = _load_dataset(spec, config.get("split"), run, notes)
    if dataset is not None and len(dataset.classes) != k:
        why = f"it has {len(dataset.classes)} classes but the run's confusions have {k}"
        dataset = None
    if dataset is None:
        _note(notes, f"The dataset {spec or ''} could not be loaded ({why}), so clean images, "
                     f"perturbations and labels are not shown and classes are numbered; "
                     f"pass --data SPEC to segtk report to point at it.", "warn")
    classes, palette = _classes_and_palette(dataset, k)
    ignore = dataset.ignore_index if dataset is not None else 255
    items = _items(dataset, [r["image"] for r in records], notes)

    saved = (run / "images").is_dir() and any((run / "images").iterdir())
    if not saved:
        _note(notes, "This run stored no adversarial images (it was made with --no-save-images), "
                     "so the per-image rows show numbers and, where the dataset loads, the clean "
                     "image and label only.", "warn")
    rows = []
    for rec in records:
        rows.append(_attack_row(run, rec, items.get(rec["image"]), palette, ignore))
    rows.sort(key=lambda r: -r["drop"])
    missing = sum(1 for r in rows if saved and r["pictures"]["adv"] is None)
    if missing:
        _note(notes, f"{missing} of {len(rows)} adversarial images are missing from images/.", "warn")

    curve = _spread([rec.get("history") or [] for rec in records])
    chart = ""
    if curve:
        name = str(config.get("attack") or "attack")
        chart = line_chart(
            [Series(f"{name} (mean)", curve["mean"], SERIES_COLOURS[0],
                    bands=((curve["min"], curve["max"]), (curve["q25"], curve["q75"])), width=2.2)],
            xlabel="queries", ylabel="best proxy so far (%)", width=600, height=330)
    eps = params.get("eps")
    return {
        "title": f"{config.get('attack', 'attack')} attack on {_brief(config.get('model'))} / "
                 f"{_brief(config.get('data'))}",
        "summary": {
            "images": table["images"],
            "rows": [
                ("dataset mIoU %", 100 * table["clean_miou"], 100 * table["adv_miou"]),
                ("mean per-image mIoU %", 100 * table["clean_image_miou"], 100 * table["adv_image_miou"]),
                ("pixel accuracy %", 100 * table["clean_pacc"], 100 * table["adv_pacc"]),
            ],
            "clean_miou": 100 * table["clean_miou"],
            "adv_miou": 100 * table["adv_miou"],
            "clean_pacc": 100 * table["clean_pacc"],
            "adv_pacc": 100 * table["adv_pacc"],
            "mean_queries": table["mean_queries"],
            "budget": params.get("budget"),
            "max_linf": table["max_linf"],
            "eps": eps,
        },
        "chart": chart,
        "curve_final": curve["mean"][-1] if curve else None,
        "curve_start": curve["mean"][0] if curve else None,
        "rows": rows,
        "legend": _legend(classes, palette, iou_per_class(summary.clean.total).tolist(),
                          iou_per_class(summary.adv.total).tolist()),
        "has_dataset": dataset is not None,
    }


def _items(dataset: Dataset | None, names: list[str], notes: list[dict[str, str]]) -> dict[str, Any]:
    if dataset is None:
        return {}
    sub = dataset.subset(names=names)
    items = {}
    for i in range(len(sub)):
        try:
            item = sub[i]
        except SegtkError as exc:
            _note(notes, f"Could not read {sub.names[i]} from the dataset: {exc.message}", "warn")
            continue
        items[item.name] = item
    if len(items) < len(names):
        absent = len(names) - len(items)
        _note(notes, f"{absent} of {len(names)} images of the run were not found in the dataset.",
              "warn")
    return items


def _attack_row(run: Path, rec: dict[str, Any], item, palette: np.ndarray, ignore: int) -> dict[str, Any]:
    name = rec["image"]
    adv_file = run / "images" / f"{name}.png"
    adv = read_image(adv_file) if adv_file.is_file() else None
    pics: dict[str, dict[str, Any] | None] = dict.fromkeys(
        ("clean", "adv", "perturbation", "clean_pred", "adv_pred", "label"))
    shape = adv.shape if adv is not None else (item.image.shape if item is not None else None)
    if adv is not None:
        pics["adv"] = _picture(_href(f"images/{name}.png"), shape)
    for key, suffix in (("clean_pred", "clean"), ("adv_pred", "adv")):
        if (run / "overlays" / f"{name}_{suffix}.png").is_file():
            pics[key] = _picture(_href(f"overlays/{name}_{suffix}.png"), shape)
    if item is not None:
        pics["clean"] = _picture(_derived(run, "clean", name, item.image), item.image.shape)
        pics["label"] = _picture(
            _derived(run, "label", name, overlay(item.image, item.label, palette, ignore_index=ignore)),
            item.image.shape)
        if adv is not None and adv.shape == item.image.shape:
            pics["perturbation"] = _picture(
                _derived(run, "perturbation", name, amplify(item.image, adv)), adv.shape,
                f"±{rec.get('linf', '?')} stretched to full range")
    clean, adv_miou = 100 * rec["clean_miou"], 100 * rec["adv_miou"]
    return {
        "image": name,
        "clean_miou": clean,
        "adv_miou": adv_miou,
        "drop": clean - adv_miou,
        "clean_pacc": 100 * rec["clean_pacc"],
        "adv_pacc": 100 * rec["adv_pacc"],
        "queries": rec.get("queries"),
        "linf": rec.get("linf"),
        "pictures": pics,
    }


# --- bench runs -------------------------------------------------------------------------------


def _bench_context(run: Path, meta: dict[str, Any], data_spec: str | None,
                   notes: list[dict[str, str]]) -> dict[str, Any]:
    from segtk.core.bench_attacks import aggregate

    records = list(read_results(run / RESULTS_FILE, key="key").values())
    if not records:
        raise SegtkError(f"{run}: no finished records in {RESULTS_FILE} yet",
                         hint="run the benchmark (or continue it with --resume) first")
    config = meta.get("config") or {}
    result = aggregate(records, _shards_from_records(records, config))
    repeats, images = config.get("repeats"), len(config.get("images") or [])
    budgets = sorted({r["budget"] for r in result.rows if r["attack"] != "clean"})
    tables = []
    for model in dict.fromkeys(r["model"] for r in result.rows):
        rows = [r for r in result.rows if r["model"] == model]
        clean = next((r for r in rows if r["attack"] == "clean"), None)
        best = {b: min((r["miou_mean"] for r in rows if r["attack"] != "clean" and r["budget"] == b),
                       default=None) for b in budgets}
        by_attack: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
        for r in rows:
            if r["attack"] != "clean":
                by_attack[r["attack"]][r["budget"]] = dict(r, best=r["miou_mean"] == best[r["budget"]])
                if (repeats and r["repeats"] < repeats) or (images and r["images"] < images):
                    _note(notes, f"{model} / {r['attack']} at {r['budget']} queries is incomplete: "
                                 f"{r['repeats']} of {repeats} repeats, {r['images']} of {images} "
                                 f"images (continue with --resume).", "warn")
        tables.append({"model": model, "clean": clean, "attacks": dict(by_attack)})

    histories = _bench_histories(records)
    for t in tables:
        series = []
        for i, (name, runs) in enumerate(histories.get(t["model"], {}).items()):
            s = _spread(runs)
            series.append(Series(name, s["mean"], SERIES_COLOURS[i % len(SERIES_COLOURS)],
                                 bands=((s["q25"], s["q75"]),), width=2.6 if name == "dla" else 1.6))
        t["chart"] = line_chart(series, xlabel="queries", ylabel="best proxy so far (%)",
                                width=600, height=340) if series else ""
    dataset, why = _load_dataset(data_spec or config.get("data"), config.get("split"), run, notes)
    k = len(records[0]["clean_confusion"])
    if dataset is None:
        _note(notes, f"The dataset could not be loaded ({why}); classes are numbered.")
    classes, palette = _classes_and_palette(dataset, k)
    files = [f for f in ("table.csv", "table.json", "curves.json", "curves.png") if (run / f).is_file()]
    models = config.get("models") or [t["model"] for t in tables]
    return {
        "title": f"Attack benchmark: {', '.join(config.get('attacks') or [])} on "
                 f"{', '.join(_brief(m) for m in models)} / {_brief(config.get('data'))}",
        "budgets": budgets,
        "tables": tables,
        "repeats": repeats,
        "images": images or len({r["image"] for r in records}),
        "eps": config.get("eps"),
        "files": files,
        "legend": _legend(classes, palette),
    }


def _shards_from_records(records: list[dict[str, Any]], config: dict[str, Any]):
    """The runs the records came from, in the config's order (what `aggregate` needs)."""
    from segtk.core.bench_attacks import Shard

    models = list(config.get("models") or [])
    attacks = list(config.get("attacks") or [])
    runs = {}
    for rec in records:
        key = (rec["model"], rec["attack"], rec["repeat"], rec["run_budget"])
        runs.setdefault(key, set()).update(int(b) for b in rec["confusions"])

    def order(key):
        m, a, r, b = key
        return (models.index(m) if m in models else len(models), m,
                attacks.index(a) if a in attacks else len(attacks), a, r, b)

    return [Shard(m, str(config.get("data", "")), config.get("split"), a, r, b, tuple(sorted(cps)),
                  (), float(config.get("eps", 0)), int(config.get("seed", 0)), 1)
            for (m, a, r, b), cps in sorted(runs.items(), key=lambda kv: order(kv[0]))]


def _bench_histories(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, list[list[float]]]]:
    """model -> attack -> histories of the runs at that attack's largest budget."""
    records = list(records)
    top: dict[tuple[str, str], int] = {}
    for rec in records:
        key = (rec["model"], rec["attack"])
        top[key] = max(top.get(key, 0), rec["run_budget"])
    out: dict[str, dict[str, list[list[float]]]] = {}
    for rec in records:
        if rec["run_budget"] == top[(rec["model"], rec["attack"])] and rec.get("history"):
            out.setdefault(rec["model"], {}).setdefault(rec["attack"], []).append(rec["history"])
    return out


# --- edit runs --------------------------------------------------------------------------------

# Manifest fields shown in their own columns or not meant for averaging.
SKIP_FIELDS = {"name", "image", "source", "source_image", "attribute", "value", "variant", "prompt",
               "prompt_source", "editor", "kind", "level", "backend", "seed", "run_seed", "index",
               "mask", "label", "class_name", "class", "object", "object_area", "parameters",
               "reason", "detail"}


def _edit_context(run: Path, meta: dict[str, Any], data_spec: str | None,
                  notes: list[dict[str, str]]) -> dict[str, Any]:
    from segtk.core.datasets import read_classes, read_manifest

    config = meta.get("config") or {}
    manifest = read_manifest(run / "manifest.jsonl") if (run / "manifest.jsonl").is_file() else []
    skipped = read_manifest(run / "skipped.jsonl") if (run / "skipped.jsonl").is_file() else []
    images = _image_files(run / "images")
    if not manifest:
        if not images and not skipped:
            raise SegtkError(f"{run}: no manifest.jsonl and no edited images yet",
                             hint="run segtk edit (or let it finish) first")
        if images:
            _note(notes, "No manifest.jsonl: attributes and values are unknown.", "warn")
        manifest = [{"name": n} for n in images]
    classes = read_classes(run) if (run / "classes.txt").is_file() else []
    source = data_spec or config.get("data")
    dataset, _ = _load_dataset(source, config.get("split"), run, notes) if source else (None, "")
    if not classes and dataset is not None:
        classes = list(dataset.classes)
    if not classes:
        _note(notes, "No classes.txt: labels are shown with the default colours.", "warn")
    _, palette = _classes_and_palette(dataset, len(classes) or 256)

    originals = _originals(run, manifest, dataset)
    rows = [_edit_row(run, rec, images.get(_edit_name(rec)), palette, originals) for rec in manifest]
    missing = sum(1 for r in rows if r["pictures"]["image"] is None)
    if missing:
        _note(notes, f"{missing} of {len(rows)} manifest entries have no image in images/.", "warn")
    attribute = str(config.get("plugin") or (rows[0]["attribute"] if rows else "") or "edit")
    summary = meta.get("summary") or {}
    plugin = config.get("plugin")
    return {
        "title": (f"{plugin} edits of {_brief(source)}" if plugin
                  else f"Edited images from {_brief(source) if source else run.name}"),
        "sheets": [_picture(_href(p.name), None) for p in _contact_sheets(run)],
        "values_table": _values_table(rows, skipped, attribute),
        "skips": _skip_table(skipped),
        "score_columns": sorted({k for r in rows for k in r["scores"]}),
        "rows": rows,
        "edited": len(rows),
        "planned": summary.get("planned") or len(rows) + len(skipped),
        "skipped": len(skipped),
        "sources": len({r["source"] for r in rows if r["source"]}),
        "legend": _legend(classes, palette) if classes else [],
        "source": source,
    }


def _edit_name(rec: dict[str, Any]) -> str:
    return str(rec.get("name") or rec.get("image") or "")


def _image_files(folder: Path) -> dict[str, Path]:
    if not folder.is_dir():
        return {}
    return {p.stem: p for p in sorted(folder.iterdir())
            if p.suffix.lower() in IMAGE_SUFFIXES and not p.name.startswith(".")}


def _contact_sheets(run: Path) -> list[Path]:
    """Top-level pictures of an edit run, contact sheets first."""
    pics = [p for p in sorted(run.iterdir())
            if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES and not p.name.startswith(".")]
    return sorted(pics, key=lambda p: ("contact" not in p.name.lower() and "sheet" not in p.name.lower()))


def _originals(run: Path, manifest: list[dict[str, Any]], dataset: Dataset | None) -> dict[str, str]:
    """Source name -> link to the unedited image: DIR/source/images/ (segtk edit keeps them
    there), else a copy from the dataset in report_files/original/."""
    sources = list(dict.fromkeys(str(r["source"]) for r in manifest if r.get("source")))
    kept = _image_files(run / "source" / "images")
    links = {s: _href(f"source/images/{kept[s].name}") for s in sources if s in kept}
    wanted = [s for s in sources if s not in links]
    if wanted and dataset is not None:
        sub = dataset.subset(names=wanted)
        for i in range(len(sub)):
            try:
                item = sub[i]
            except SegtkError:
                continue
            links[item.name] = _derived(run, "original", item.name, item.image)
    return links


def _edit_row(run: Path, rec: dict[str, Any], image_file: Path | None, palette: np.ndarray,
              originals: dict[str, str]) -> dict[str, Any]:
    name = _edit_name(rec)
    pics: dict[str, dict[str, Any] | None] = dict.fromkeys(("original", "image", "label", "mask"))
    coverage = None
    if image_file is not None:
        image = read_image(image_file)
        pics["image"] = _picture(_href(f"images/{image_file.name}"), image.shape)
        label_file = run / "labels" / f"{name}.png"
        if label_file.is_file():
            label = read_label(label_file)
            if label.shape == image.shape[:2]:
                pics["label"] = _picture(_derived(run, "label", name, overlay(image, label, palette)),
                                         image.shape)
        mask_file = run / "masks" / f"{name}.png"
        if mask_file.is_file():
            mask = np.asarray(read_label(mask_file)) > 0
            if mask.shape == image.shape[:2]:
                coverage = 100 * float(mask.mean())
                shown = np.where(mask[..., None], image, (image * 0.25 + 40).astype(np.uint8))
                pics["mask"] = _picture(_derived(run, "mask", name, shown), image.shape)
        if str(rec.get("source")) in originals:
            pics["original"] = _picture(originals[str(rec.get("source"))], image.shape)
    scores = {k: float(v) for k, v in rec.items()
              if k not in SKIP_FIELDS and isinstance(v, float) and math.isfinite(v)}
    area = rec.get("object_area")
    return {
        "name": name,
        "attribute": str(rec.get("attribute") or "–"),
        "value": "–" if rec.get("value") is None else str(rec.get("value")),
        "editor": str(rec.get("editor") or ""),
        "source": str(rec.get("source") or ""),
        "prompt": str(rec.get("prompt") or ""),
        "object": str(rec.get("class") or rec.get("class_name") or rec.get("object") or ""),
        "object_area": 100 * float(area) if isinstance(area, int | float) else None,
        "coverage": coverage,
        "scores": scores,
        "pictures": pics,
    }


def _mean(values: Iterable[float | None]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def _values_table(rows: list[dict[str, Any]], skipped: list[dict[str, Any]],
                  attribute: str) -> list[dict[str, Any]]:
    """One row per attribute and value (plus an 'all values' row where there are several)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r["attribute"], r["value"])].append(r)
    skips: dict[tuple[str, str], int] = defaultdict(int)
    for rec in skipped:
        key = (str(rec.get("attribute") or attribute), str(rec.get("value", "–")))
        skips[key] += 1
        groups.setdefault(key, [])

    def line(attr: str, value: str, group: list[dict[str, Any]], skip: int, total: bool) -> dict:
        names = {k for r in group for k in r["scores"]}
        return {
            "attribute": attr, "value": value, "total": total, "edits": len(group),
            "skipped": skip, "sources": len({r["source"] for r in group if r["source"]}),
            "coverage": _mean(r["coverage"] for r in group),
            "object_area": _mean(r["object_area"] for r in group),
            "objects": list(dict.fromkeys(r["object"] for r in group if r["object"])),
            "scores": {k: _mean(r["scores"].get(k) for r in group) for k in names},
        }

    out = []
    for attr in dict.fromkeys(a for a, _ in groups):
        keys = [k for k in groups if k[0] == attr]
        out.extend(line(attr, v, groups[(attr, v)], skips[(attr, v)], False) for _, v in keys)
        if len(keys) > 1:
            out.append(line(attr, "all values", [r for k in keys for r in groups[k]],
                            sum(skips[k] for k in keys), True))
    return out


def _skip_table(skipped: list[dict[str, Any]]) -> list[dict[str, Any]]:
    try:
        from segtk.core.samples import SKIP_REASONS
    except ImportError:  # pragma: no cover - the editing core is optional here
        SKIP_REASONS = {}
    by_reason: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for rec in skipped:
        by_reason[str(rec.get("reason") or "unknown")].append(rec)
    return [{"reason": reason, "count": len(recs),
             "sources": len({r.get("source") for r in recs}),
             "meaning": SKIP_REASONS.get(reason, ""),
             "example": str(recs[0].get("detail") or "")}
            for reason, recs in sorted(by_reason.items(), key=lambda kv: -len(kv[1]))]

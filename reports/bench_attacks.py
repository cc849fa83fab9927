"""Report context of an attack benchmark (`segtk bench attacks`): the attack × budget table
(mean ± std) and the curves."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from segtk.core.errors import SegtkError
from segtk.reports.common import (
    _brief,
    _classes_and_palette,
    _legend,
    _load_dataset,
    _note,
    _spread,
)
from segtk.reports.svg import SERIES_COLOURS, Series, line_chart
from segtk.core.runs import RESULTS_FILE, read_results


def bench_context(run: Path, meta: dict[str, Any], data_spec: str | None,
                   notes: list[dict[str, str]]) -> dict[str, Any]:
    from segtk.benchmarks.attacks import aggregate

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
    from segtk.benchmarks.attacks import Shard

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

    images = tuple(config.get("images") or sorted({rec["image"] for rec in records}))
    return [Shard(m, str(config.get("data", "")), config.get("split"), a, r, b, tuple(sorted(cps)),
                  images, float(config.get("eps", 0)), int(config.get("seed", 0)), 1)
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

"""Report context of an attack benchmark (`segtk bench attacks`): the attack × budget table
(mean ± std of the stored 8-bit images; one table per model and ε) and the proxy curves.
White-box attacks are tagged, listed after the decision-based ones and never marked the
strongest; each decision-based attack's gap to the best of them has its own table."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from segtk.benchmarks.attacks import Shard, aggregate, curve_label, white_box_gaps
from segtk.core import SegtkError, brief_spec
from segtk.reports.common import (
    _classes_and_palette,
    _legend,
    _load_dataset,
    _note,
    _spread,
)
from segtk.reports.svg import SERIES_COLOURS, Series, line_chart
from segtk.storage.runs import RESULTS_FILE, read_results


def bench_context(run: Path, meta: dict[str, Any], data_spec: str | None,
                   notes: list[dict[str, str]]) -> dict[str, Any]:
    records = list(read_results(run / RESULTS_FILE, key="key").values())
    if not records:
        raise SegtkError(f"{run}: no finished records in {RESULTS_FILE} yet",
                         hint="run the benchmark (or continue it with --resume) first")
    config = meta.get("config") or {}
    if any("eps" not in rec for rec in records):
        _note(notes, "This run was recorded by an older segtk, whose table scored the attacks' float "
                     "candidates, not the stored 8-bit images (rerun it to score those).", "warn")
    shards = _shards_from_records(records, config)
    sweep = list(dict.fromkeys(s.eps for s in shards))
    result = aggregate(records, shards)
    repeats, images = config.get("repeats"), len(config.get("images") or [])
    budgets = sorted({r["budget"] for r in result.rows if r["attack"] != "clean"})
    tables = []
    gaps = white_box_gaps(result.rows)
    for model in dict.fromkeys(r["model"] for r in result.rows):
        mine = [r for r in result.rows if r["model"] == model]
        clean = next((r for r in mine if r["attack"] == "clean"), None)
        for eps in sweep:
            rows = [r for r in mine if r["attack"] != "clean" and r.get("eps") == eps]
            rows.sort(key=lambda r: bool(r.get("white_box")))  # white-box rows last (stable)
            best = {b: min((r["miou_mean"] for r in rows if r["budget"] == b
                            and not r.get("white_box")), default=None) for b in budgets}
            by_attack: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
            for r in rows:
                strongest = not r.get("white_box") and r["miou_mean"] == best[r["budget"]]
                by_attack[r["attack"]][r["budget"]] = dict(r, best=strongest)
                if (repeats and r["repeats"] < repeats) or (images and r["images"] < images):
                    _note(notes, f"{model} / {r['attack']} (ε={eps:g}) at {r['budget']} queries is "
                                 f"incomplete: {r['repeats']} of {repeats} repeats, {r['images']} of "
                                 f"{images} images (continue with --resume).", "warn")
            title = model if len(sweep) == 1 else f"{model}, ε={eps:g}"
            gap_cells: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
            for g in gaps:
                if g["model"] == model and g["eps"] == eps:
                    gap_cells[g["attack"]][g["budget"]] = g
            tables.append({"model": title, "source": model, "eps": eps, "clean": clean,
                           "attacks": dict(by_attack), "gaps": dict(gap_cells),
                           "white_box": sorted({r["attack"] for r in rows if r.get("white_box")})})

    histories = _bench_histories(records, sweep)
    for t in tables:
        series = []
        runs_by_label = histories.get(t["source"], {})
        for i, name in enumerate(t["attacks"]):
            runs = runs_by_label.get(curve_label(name, t["eps"], sweep))
            if not runs:
                continue
            s = _spread(runs)
            shown = name + (" (white-box)" if name in t["white_box"] else "")
            series.append(Series(shown, s["mean"], SERIES_COLOURS[i % len(SERIES_COLOURS)],
                                 bands=((s["q25"], s["q75"]),), width=2.6 if name == "dla" else 1.6))
        t["chart"] = line_chart(series, xlabel="queries", ylabel="best proxy so far (%)",
                                width=600, height=340) if series else ""
    dataset, why = _load_dataset(data_spec or config.get("data"), config.get("split"), run, notes)
    k = len(records[0]["clean_confusion"])
    if dataset is None:
        _note(notes, f"The dataset could not be loaded ({why}); classes are numbered.")
    classes, palette = _classes_and_palette(dataset, k)
    files = [f for f in ("table.csv", "table.json", "curves.json", "curves.png") if (run / f).is_file()]
    models = config.get("models") or list(dict.fromkeys(t["source"] for t in tables))
    return {
        "title": f"Attack benchmark: {', '.join(config.get('attacks') or [])} on "
                 f"{', '.join(brief_spec(m) for m in models)} / {brief_spec(config.get('data'))}",
        "budgets": budgets,
        "tables": tables,
        "repeats": repeats,
        "images": images or len({r["image"] for r in records}),
        "eps": ", ".join(f"{e:g}" for e in sweep),
        "files": files,
        "legend": _legend(classes, palette),
    }


def _config_eps(config: dict[str, Any]) -> list[float]:
    """The run's ε values: a list since ε sweeps, one number before."""
    eps = config.get("eps", 0)
    return [float(e) for e in (eps if isinstance(eps, list) else [eps])]


def _shards_from_records(records: list[dict[str, Any]], config: dict[str, Any]) -> list[Shard]:
    """The runs the records came from, in the config's order (what `aggregate` needs)."""
    models = list(config.get("models") or [])
    attacks = list(config.get("attacks") or [])
    sweep = _config_eps(config)
    runs: dict[tuple[str, str, float, int, int], set[int]] = {}
    for rec in records:
        key = (rec["model"], rec["attack"], float(rec.get("eps", sweep[0])), rec["repeat"],
               rec["run_budget"])
        runs.setdefault(key, set()).update(int(b) for b in rec["confusions"])

    def order(key):
        m, a, e, r, b = key
        return (models.index(m) if m in models else len(models), m,
                sweep.index(e) if e in sweep else len(sweep), e,
                attacks.index(a) if a in attacks else len(attacks), a, r, b)

    images = tuple(config.get("images") or sorted({rec["image"] for rec in records}))
    return [Shard(m, str(config.get("data", "")), config.get("split"), a, r, b, tuple(sorted(cps)),
                  images, e, int(config.get("seed", 0)), 1)
            for (m, a, e, r, b), cps in sorted(runs.items(), key=lambda kv: order(kv[0]))]


def _bench_histories(records: Iterable[dict[str, Any]],
                     sweep: list[float]) -> dict[str, dict[str, list[list[float]]]]:
    """model -> curve label (attack, plus ε in a sweep) -> histories of the runs at that
    attack's largest budget."""
    records = list(records)

    def run_of(rec: dict[str, Any]) -> tuple[str, str, float]:
        return rec["model"], rec["attack"], float(rec.get("eps", sweep[0]))

    top: dict[tuple[str, str, float], int] = {}
    for rec in records:
        top[run_of(rec)] = max(top.get(run_of(rec), 0), rec["run_budget"])
    out: dict[str, dict[str, list[list[float]]]] = {}
    for rec in records:
        model, attack, eps = run_of(rec)
        if rec["run_budget"] == top[run_of(rec)] and rec.get("history"):
            label = curve_label(attack, eps, sweep)
            out.setdefault(model, {}).setdefault(label, []).append(rec["history"])
    return out

"""Report context of an attack benchmark (`segtk bench attacks`): the attack × budget table
(mean ± std of the stored 8-bit images; one table per model and ε), the visibility table
(PSNR, SSIM, changed pixels, OKLab ΔE at the largest budget), the proxy curves and a labelled
contact sheet. White-box attacks are tagged, listed after the decision-based ones and never
marked the strongest; each decision-based attack's gap to the best of them has its own table.

Everything is built from the run's records (results.jsonl), not from run.json's options, which
name only the last invocation's attacks and ε: after any number of `--resume`s that add
attacks, the page covers every attack the run holds."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from segtk.benchmarks.attacks import (
    PERTURBATION_ROW,
    BenchAttackRecord,
    aggregate,
    bench_records,
    curve_label,
    recorded_shards,
    sheet_layout,
    white_box_gaps,
    write_contact_sheet,
)
from segtk.core._specs import brief_spec
from segtk.reports.attack import reference_notes
from segtk.reports.common import (
    FILES_DIR,
    _classes_and_palette,
    _href,
    _legend,
    _load_dataset,
    _note,
    _spread,
    finished_records,
)
from segtk.reports.svg import SERIES_COLOURS, Series, line_chart
from segtk.storage import layout


def bench_context(run: Path, meta: dict[str, Any], data_spec: str | None,
                   notes: list[dict[str, str]]) -> dict[str, Any]:
    records = bench_records(finished_records(run), run / layout.RESULTS)
    config = meta.get("config") or {}
    if any(rec.eps is None for rec in records):
        _note(notes, "This run was recorded by an older segtk, whose table scored the attacks' float "
                     "candidates, not the stored 8-bit images (rerun it to score those).", "warn")
    sweep_of_config = _config_eps(config)
    images_of_config = config.get("images") or sorted({rec.image for rec in records})
    shards = recorded_shards(records, images_of_config, default_eps=sweep_of_config[0],
                             data=str(config.get("data", "")), split=config.get("split"),
                             seed=int(config.get("seed", 0)),
                             planned=[(m, a, e) for m in config.get("models") or []
                                      for e in sweep_of_config for a in config.get("attacks") or []])
    sweep = list(dict.fromkeys(s.eps for s in shards))
    attacks = list(dict.fromkeys(s.attack for s in shards))
    if set(attacks) - set(config.get("attacks") or []):
        _note(notes, f"run.json records the last invocation's options (--attacks "
                     f"{','.join(config.get('attacks') or [])}); this page covers all "
                     f"{len(attacks)} attacks the run's records hold.")
    result = aggregate(records, shards)
    reference_notes(config.get("reference"), [r.scored_against for r in records], notes)
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
            title = brief_spec(model) + ("" if len(sweep) == 1 else f", ε={eps:g}")
            gap_cells: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
            for g in gaps:
                if g["model"] == model and g["eps"] == eps:
                    gap_cells[g["attack"]][g["budget"]] = g
            tables.append({"model": title, "source": model, "eps": eps, "clean": clean,
                           "attacks": dict(by_attack), "gaps": dict(gap_cells),
                           "white_box": sorted({r["attack"] for r in rows if r.get("white_box")}),
                           "visibility": [_visible(r) for r in rows if "ssim" in r]})

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
    k = len(records[0].clean_confusion)
    if dataset is None:
        _note(notes, f"The dataset could not be loaded ({why}); classes are numbered.")
    classes, palette = _classes_and_palette(dataset, k)
    files = [f for f in (layout.TABLE_CSV, layout.TABLE_JSON, layout.CURVES_JSON, layout.CURVES_PNG,
                         layout.CONTACT_SHEET) if (run / f).is_file()]
    models = list(dict.fromkeys(s.model for s in shards))
    return {
        "title": f"Attack benchmark: {', '.join(attacks)} on "
                 f"{', '.join(brief_spec(m) for m in models)} / {brief_spec(config.get('data'))}",
        "attacks": attacks,
        "sheet": _contact_sheet(run, dataset, attacks, max(budgets, default=0), max(sweep), notes),
        "budgets": budgets,
        "tables": tables,
        "repeats": repeats,
        "images": images or len({r.image for r in records}),
        "eps": ", ".join(f"{e:g}" for e in sweep),
        "files": files,
        "legend": _legend(classes, palette),
    }


def _visible(row: dict[str, Any]) -> dict[str, Any]:
    """A visibility row as the page shows it: an unchanged image's PSNR is ∞ (data-v sorts it
    above every finite value)."""
    psnr = row["psnr"]
    finite = math.isfinite(psnr)
    return dict(row, psnr_shown=f"{psnr:.2f}" if finite else "∞", psnr_v=psnr if finite else 1e9)


def _config_eps(config: dict[str, Any]) -> list[float]:
    """The run's ε values: a list since ε sweeps, one number before."""
    eps = config.get("eps", 0)
    return [float(e) for e in (eps if isinstance(eps, list) else [eps])]


def _bench_histories(records: Iterable[BenchAttackRecord],
                     sweep: list[float]) -> dict[str, dict[str, list[list[float]]]]:
    """model -> curve label (attack, plus ε in a sweep) -> histories of the runs at that
    attack's largest budget."""
    records = list(records)

    def run_of(rec: BenchAttackRecord) -> tuple[str, str, float]:
        return rec.model, rec.attack, float(sweep[0] if rec.eps is None else rec.eps)

    top: dict[tuple[str, str, float], int] = {}
    for rec in records:
        top[run_of(rec)] = max(top.get(run_of(rec), 0), rec.run_budget)
    out: dict[str, dict[str, list[list[float]]]] = {}
    for rec in records:
        model, attack, eps = run_of(rec)
        if rec.run_budget == top[run_of(rec)] and rec.history:
            label = curve_label(attack, eps, sweep)
            out.setdefault(model, {}).setdefault(label, []).append(rec.history)
    return out


def _contact_sheet(run: Path, dataset, attacks: list[str], budget: int, eps: float,
                   notes: list[dict[str, str]]) -> dict[str, Any] | None:
    """report_files/contact_sheet.png: the labelled sheet of every attack in the run (the one
    the last invocation wrote may name fewer), and its layout for the page's caption."""
    if dataset is None:
        _note(notes, "No contact sheet: it needs the clean images of the dataset.", "warn")
        return None
    shown = sheet_layout(run, dataset, attacks, budget, eps)
    if shown is None:
        _note(notes, f"No contact sheet: the run stored no adversarial images at ε={eps:g} and "
                     f"{budget} queries in {layout.SHEET_DIR}/.", "warn")
        return None
    rel = f"{FILES_DIR}/{layout.CONTACT_SHEET}"
    write_contact_sheet(run, dataset, attacks, budget, eps, path=run / rel)
    return {"src": _href(rel), "columns": list(shown.columns), "images": list(shown.images),
            "eps": f"{eps:g}", "budget": budget, "perturbation": PERTURBATION_ROW,
            "missing": [a for a in attacks if a not in shown.columns]}

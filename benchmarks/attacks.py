"""`segtk bench attacks`: attack specs × ε × budgets × models × repeats, sharded, resumable.

An attack is given as a spec, `NAME[:KEY=VALUE[;KEY=VALUE...]]` (e.g.
`dla:direction=horizontal;calibration=random`): each spec is its own table row, so one run
prints an ablation table, and records are keyed by the full spec (and ε), so --resume reuses
every spec and ε already run.

An attack whose first b queries do not depend on the total budget (`anytime`) runs once per
repeat at the largest budget and the smaller budgets are read off the oracle's checkpoints;
budget-dependent schedules (DLA's T/5 exploration, Square's p schedule) run once per budget.
Every table number is a dataset mIoU of the stored 8-bit images: at each budget the best
candidate is quantised exactly as `segtk attack` stores it (jobs.attack.quantise) and the model
is evaluated on that image (uncounted, like `segtk attack`'s evaluation pass). The histories
and curves are the oracle's proxy of the float candidates.

White-box attacks (`Attack.white_box`: gradients of the logits, budget = forward and backward
passes) are recorded and tabled as such (`white_box` in records, rows and table.csv) and never
ranked with the decision-based ones; `white_box_gaps` measures each decision-based attack
against the best white-box result at the same model, ε and budget.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageDraw
from PIL.PngImagePlugin import PngInfo

from segtk.benchmarks.visibility import visibility
from segtk.class_names import check_compatible
from segtk.core import (
    Attack,
    Dataset,
    PluginError,
    SegtkError,
    atomic_write_bytes,
    build,
    confusion,
    declared,
    load_dataset,
    parse_pairs,
    read_image,
    registry,
    to_tensor,
    write_png,
)
from segtk.core._attack import check_gradients
from segtk.core._metrics import mean_iou, pixel_accuracy
from segtk.core._specs import brief_spec, cached_segmenter
from segtk.imaging import amplify, save_figure
from segtk.jobs.attack import evaluate, image_seed, quantise, run_attack, scoring_labels
from segtk.jobs.batching import batch_tensors, same_size_batches
from segtk.storage import layout
from segtk.storage.records import Record
from segtk.storage.runs import Records, atomic_write_json

SPEC_SYNTAX = "NAME[:KEY=VALUE[;KEY=VALUE...]]"
SHARED = ("budget", "eps", "seed", "time_limit")  # set by the bench's own options, not a spec


@dataclass(kw_only=True)
class BenchAttackRecord(Record):
    """One image of one run of `segtk bench attacks` (model, attack spec, ε, repeat and the
    budget it was given): a line of OUT/results.jsonl, `key` naming all of them. Confusions
    are [true, predicted] pixel counts: the clean image's, and the stored 8-bit image's at each
    budget read off the run (`confusions`, by budget as text); `history` is the oracle's proxy
    of the float candidates, `visibility` what `visibility()` measures of the final image."""

    KIND = "segtk bench attacks record"
    # Fields added after runs were made: a line without them is an older run's.
    OMIT_DEFAULT = ("eps", "visibility", "stopped", "white_box", "scored_against")

    key: str
    model: str
    attack: str  # the spec's label, NAME[:KEY=VALUE;...]
    eps: float | None = None  # None: recorded before ε sweeps (the run's one ε)
    repeat: int
    run_budget: int
    image: str
    queries: int
    clean_confusion: list[list[int]]
    confusions: dict[str, list[list[int]]]
    history: list[float]
    visibility: dict[str, float] | None = None  # None: recorded before visibility was measured
    stopped: str | None = None  # "time": a time limit stopped the attack
    white_box: bool = False
    scored_against: str = "labels"  # "prediction": no labels, scored against the clean one


def bench_records(lines: Iterable[Mapping[str, Any]], source: Path | None) -> list[BenchAttackRecord]:
    """results.jsonl's lines (`Records.done(key="key")`'s values, or `read_results`'s) as
    BenchAttackRecords; the error a bad one raises names `source` (the file) and its key."""
    return list(BenchAttackRecord.keyed({line["key"]: line for line in lines}, source).values())


@dataclass(frozen=True)
class AttackSpec:
    """A parsed attack spec: `label` is its canonical text (the row label and record key)."""

    label: str
    name: str
    params: dict[str, str]


def parse_spec(text: str) -> AttackSpec:
    """'dla:direction=horizontal;calibration=random' -> AttackSpec; the keys and values are
    checked by building the attack once (a bad spec is one error naming it and its keys)."""
    name, _, rest = text.strip().partition(":")
    name = name.strip()
    try:
        cls = registry.attack(name)
    except SegtkError as exc:
        raise type(exc)(f"attack spec {text!r}: {exc.message}", exc.hint) from exc
    takes_all = declared(cls).params
    keys = [f"{k}={d}" for k, (_, d) in takes_all.items() if k not in SHARED]
    defaults = {k: d for k, (_, d) in takes_all.items() if k in SHARED}  # the bench sets its own
    takes = (f"{name} takes {', '.join(keys) or 'no parameters'}; write {SPEC_SYNTAX} "
             "(quote the ';' in a shell)")
    try:
        params = parse_pairs([p for p in rest.split(";") if p.strip()], "parameter")
        for key in params:
            if key.replace("-", "_") in SHARED:
                flag = "--" + key.replace("_", "-")
                raise SegtkError(f"{key} is set by {flag} for every spec, not in a spec")
        build("attack", name, params, **defaults)  # reads and validates the values
    except SegtkError as exc:
        raise PluginError(f"bad attack spec {text!r}: {exc.message}", hint=takes) from exc
    label = name + (":" + ";".join(f"{k}={v}" for k, v in params.items()) if params else "")
    return AttackSpec(label, name, params)


def build_spec(label: str, *, budget: int, eps: float, seed: int,
               time_limit: float | None = None) -> Attack:
    """The attack a spec names, with the bench's budget, ε, seed and time limit."""
    spec = parse_spec(label)
    try:
        attack = build("attack", spec.name, spec.params, budget=budget, eps=eps, seed=seed,
                       time_limit=time_limit)
    except SegtkError as exc:
        raise PluginError(f"bad attack spec {label!r} at ε={eps:g}, budget {budget}: {exc.message}",
                          hint=exc.hint) from exc
    assert isinstance(attack, Attack)
    return attack


def sheet_path(sheet_dir: str | Path, attack: str, eps: float, budget: int, image: str) -> Path:
    """Where repeat 0 leaves a stored image for the contact sheet (the spec made path-safe)."""
    return Path(sheet_dir) / re.sub(r"[^\w.-]+", "_", attack) / f"eps{eps:g}_{budget}_{image}.png"


@dataclass(frozen=True)
class Shard:
    model: str
    data: str
    split: str | None
    attack: str  # the spec's label, NAME[:KEY=VALUE;...]
    repeat: int
    budget: int  # the budget this run is given
    checkpoints: tuple[int, ...]  # budgets read off this run
    images: tuple[str, ...]
    eps: float
    seed: int
    batch_size: int
    sheet_dir: str | None = None  # where repeat 0 leaves its adversarial PNGs for the sheet
    time_limit: float | None = None  # seconds per run of a batch (--time-limit), None: none
    device: str = "cpu"  # where the model and tensors live (segtk.core._device.resolve_device's name)

    def key(self, image: str) -> str:
        return f"{self.model}|{self.attack}|eps={self.eps!r}|{self.repeat}|{self.budget}|{image}"


def run_shard(shard: Shard) -> list[BenchAttackRecord]:
    """Attack one chunk of images; one record per image (runs in a worker)."""
    model = cached_segmenter(shard.model, shard.device)
    attack = build_spec(shard.attack, budget=shard.budget, eps=shard.eps, seed=shard.seed + shard.repeat,
                        time_limit=shard.time_limit)
    reference = attack.params.reference
    data = _load(shard.data, shard.split, reference == "prediction").subset(names=shard.images)
    k, ignore = len(data.classes), data.ignore_index
    records = []
    for batch in same_size_batches(data, range(len(data)), shard.batch_size):
        x, y = batch_tensors(batch, model.device)
        clean_u8 = np.stack([item.image for item in batch])
        seeds = [image_seed(attack.params.seed, item.name) for item in batch]
        result = run_attack(attack, model, x, y, [item.name for item in batch], seeds=seeds,
                            checkpoints=shard.checkpoints, num_classes=k, ignore_index=ignore)
        clean = result.clean_predictions
        clean = (clean if clean is not None else evaluate(model, x)).cpu()
        # what `segtk attack --budget b` would store, and the model's decision on it
        stored = {b: quantise(result.checkpoint_images[b], clean_u8, shard.eps) for b in shard.checkpoints}
        decided = {b: evaluate(model, to_tensor(list(s)).to(model.device)).cpu() for b, s in stored.items()}
        final = stored[shard.budget]
        truth, against = scoring_labels(y.cpu(), clean, k, ignore, reference)
        for i, item in enumerate(batch):
            if shard.sheet_dir and shard.repeat == 0:
                write_png(sheet_path(shard.sheet_dir, shard.attack, shard.eps, shard.budget, item.name),
                          final[i])
            records.append(BenchAttackRecord(
                key=shard.key(item.name),
                model=shard.model, attack=shard.attack, eps=shard.eps,
                repeat=shard.repeat, run_budget=shard.budget, image=item.name,
                queries=int(result.queries[i]),
                clean_confusion=confusion(clean[i], truth[i], k, ignore)[0].tolist(),
                # of the stored 8-bit image at each budget
                confusions={str(b): confusion(d[i], truth[i], k, ignore)[0].tolist()
                            for b, d in decided.items()},
                history=[round(v, 6) for v in result.history[i]],  # proxy of float candidates
                visibility=visibility(item.image, final[i]),
                stopped=result.stopped[i] or None,
                white_box=bool(attack.white_box),
                scored_against=against[i],
            ))
    return records


def _load(data: str, split: str | None, unlabelled: bool) -> Dataset:
    """`load_dataset`, taking a dataset without labels only for label-free attacks."""
    return load_dataset(data, split, unlabelled=True) if unlabelled else load_dataset(data, split)


def plan(models: list[str], data: str, split: str | None, attacks: list[str], budgets: list[int],
         repeats: int, images: list[str], chunk: int, eps: float | Sequence[float], seed: int,
         batch_size: int, sheet_dir: str | None = None,
         time_limit: float | None = None, device: str = "cpu") -> list[Shard]:
    """The shards of a bench: `attacks` are spec labels, `eps` one value or a sweep."""
    budgets = sorted(set(budgets))
    sweep = [float(e) for e in ([eps] if isinstance(eps, int | float) else eps)]
    shards = []
    for model in models:
        for e in dict.fromkeys(sweep):
            for label in attacks:
                anytime = registry.attack(label.partition(":")[0].strip()).anytime
                runs = [(budgets[-1], tuple(budgets))] if anytime else [(b, (b,)) for b in budgets]
                for repeat in range(repeats):
                    for budget, checkpoints in runs:
                        for start in range(0, len(images), chunk):
                            shards.append(Shard(model, data, split, label, repeat, budget, checkpoints,
                                                tuple(images[start:start + chunk]), e, seed,
                                                batch_size, sheet_dir, time_limit, device))
    return shards


def recorded_shards(records: Iterable[BenchAttackRecord], images: Sequence[str], *,
                    default_eps: float = 0.0, data: str = "", split: str | None = None,
                    seed: int = 0, planned: Sequence[tuple[str, str, float]] = ()) -> list[Shard]:
    """The runs a bench's records come from (one shard per model, attack spec, ε, repeat and
    budget): what `aggregate` needs to table every attack a run holds, whichever invocation
    (first run or --resume) added it. Ordered as `planned` lists (model, attack, ε) — the
    options' order — then what else the run holds, as first recorded: records land in the
    order shards finish, which differs between identical runs. `images`: the images a complete
    repeat covers; `default_eps`: the ε of records written before sweeps."""
    runs: dict[tuple[str, str, float, int, int], set[int]] = {}
    for rec in records:
        key = (rec.model, rec.attack, float(default_eps if rec.eps is None else rec.eps),
               rec.repeat, rec.run_budget)
        runs.setdefault(key, set()).update(int(b) for b in rec.confusions)
    rank = option_order([*planned, *(k[:3] for k in runs)])
    return [Shard(m, data, split, a, r, b, tuple(sorted(cps)), tuple(images), e, seed, 1)
            for (m, a, e, r, b), cps in sorted(runs.items(), key=lambda kv: (rank(kv[0][:3]),
                                                                            *kv[0][3:]))]


def option_order(runs: Iterable[tuple[str, str, float]]) -> Callable[[tuple[str, str, float]],
                                                                      tuple[int, int, int]]:
    """A sort key putting (model, attack, ε) in the order each model, ε and attack first
    appears in `runs`: the order `aggregate` tables them in (model, then ε, then attack)."""
    runs = list(runs)
    models = list(dict.fromkeys(k[0] for k in runs))
    attacks = list(dict.fromkeys(k[1] for k in runs))
    sweep = list(dict.fromkeys(float(k[2]) for k in runs))
    return lambda k: (models.index(k[0]), sweep.index(float(k[2])), attacks.index(k[1]))


def with_recorded(shards: list[Shard], records: Iterable[BenchAttackRecord]) -> list[Shard]:
    """`shards` plus the recorded runs of every (model, attack, ε) they do not plan: the
    planned ones first, in the options' order, then the others as the run first recorded them.
    The table, curves and contact sheet of a resumed run cover what earlier invocations added
    too."""
    if not shards:
        return []
    first = shards[0]
    recorded = [s for s in recorded_shards(records, first.images, default_eps=first.eps,
                                           data=first.data, split=first.split, seed=first.seed)
                if s.model in {p.model for p in shards}]
    planned = {(s.model, s.attack, s.eps) for s in shards}
    every = [*shards, *(s for s in recorded if (s.model, s.attack, s.eps) not in planned)]
    rank = option_order((s.model, s.attack, s.eps) for s in every)
    return sorted(every, key=lambda s: rank((s.model, s.attack, s.eps)))


@dataclass
class BenchResult:
    rows: list[dict[str, Any]] = field(default_factory=list)
    # model -> curve label (the spec, plus ε in a sweep) -> mean proxy of the float candidates
    curves: dict[str, dict[str, list[float]]] = field(default_factory=dict)


def run_bench(shards: list[Shard], run: Records, executor, on_records: Callable[[int], None] | None = None,
              classes_from_data: bool = False) -> None:
    """Run the shards not finished yet; append their records as they land. A shard cut short
    is run again whole (its images share batches) but only its missing records are appended:
    what results.jsonl held stays as it was, and each record is in it once. Every model is
    checked against the data first (check_compatible), and against each white-box attack
    (check_gradients)."""
    done = {r.key for r in _records(run)}
    todo = [s for s in shards if any(s.key(img) not in done for img in s.images)]
    if on_records:
        on_records(sum(s.key(img) in done for s in shards for img in s.images))
    for model, data, split, device in dict.fromkeys((s.model, s.data, s.split, s.device)
                                                    for s in todo):
        label_free = all(parse_spec(s.attack).params.get("reference") == "prediction"
                         for s in todo if s.data == data)
        check_compatible(cached_segmenter(model, device),
                         _load(data, split, label_free).subset(limit=1), classes_from_data)
    for device in dict.fromkeys(s.device for s in todo):
        check_white_box([s.model for s in todo], [s.attack for s in todo], device)
    for records in executor.map(run_shard, todo):
        missing = [rec for rec in records if rec.key not in done]
        for rec in missing:
            run.append(rec.to_json())
        if on_records:
            on_records(len(missing))


def check_white_box(models: Iterable[str], labels: Iterable[str], device: str = "cpu") -> None:
    """Refuse a white-box attack spec on a model that gives no gradients, before any work."""
    for model in dict.fromkeys(models):
        for label in dict.fromkeys(labels):
            check_gradients(registry.attack(label.partition(":")[0].strip()),
                            cached_segmenter(model, device))


def _records(run: Records) -> list[BenchAttackRecord]:
    """The run's finished records (a torn last line is dropped)."""
    return bench_records(run.done(key="key").values(), run.path and run.path / layout.RESULTS)


def curve_label(attack: str, eps: float, sweep: Sequence[float]) -> str:
    return attack if len(sweep) == 1 else f"{attack} ε={eps:g}"


def aggregate(records: Iterable[BenchAttackRecord], shards: list[Shard]) -> BenchResult:
    """Table rows (clean first, then ε × attack × budget, mean ± std over complete repeats)
    and curves. A record without `eps` (written before ε sweeps) counts when the shards have
    one ε."""
    records = list(records)
    sweep = list(dict.fromkeys(s.eps for s in shards))
    wanted = {(s.model, s.attack, s.eps, s.budget) for s in shards}
    by_run: dict[tuple, dict[str, torch.Tensor]] = defaultdict(dict)
    clean: dict[str, dict[str, torch.Tensor]] = defaultdict(dict)
    histories: dict[tuple[str, str, float], list[list[float]]] = defaultdict(list)
    seen_by: dict[tuple[str, str, float], list[dict[str, float]]] = defaultdict(list)
    max_budget: dict[tuple[str, str, float], int] = {}
    images: dict[str, set[str]] = defaultdict(set)
    white_box: set[tuple[str, str, float]] = set()
    scored: dict[str, set[str]] = defaultdict(set)  # model -> what its images were scored against
    for s in shards:
        run = (s.model, s.attack, s.eps)
        max_budget[run] = max(s.budget, max_budget.get(run, 0))
        images[s.model].update(s.images)
    for rec in records:
        eps = rec.eps if rec.eps is not None else sweep[0] if len(sweep) == 1 else None
        if eps is None or (rec.model, rec.attack, eps, rec.run_budget) not in wanted \
                or rec.image not in images[rec.model]:  # an image past a --limit lowered on resume
            continue
        run = (rec.model, rec.attack, eps)
        clean[rec.model][rec.image] = torch.tensor(rec.clean_confusion)
        scored[rec.model].add(rec.scored_against)
        if rec.white_box:
            white_box.add(run)
        for budget, conf in rec.confusions.items():
            by_run[(*run, int(budget), rec.repeat)][rec.image] = torch.tensor(conf)
        if rec.run_budget == max_budget[run]:
            histories[run].append(rec.history)
            if rec.visibility is not None:
                seen_by[run].append(rec.visibility)
    result = BenchResult()
    budgets = sorted({b for s in shards for b in s.checkpoints})
    models = list(dict.fromkeys(s.model for s in shards))
    attacks = list(dict.fromkeys(s.attack for s in shards))
    for model in models:
        first = len(result.rows)
        total = sum(clean[model].values())
        if isinstance(total, torch.Tensor):
            result.rows.append(_row(model, "clean", None, 0, [total], len(clean[model])))
        for eps in sweep:
            for name in attacks:
                run = (model, name, eps)
                for b in budgets:
                    # a repeat still running (or cut short) would be a mIoU over other images
                    reps = sorted(key[-1] for key in by_run if key[:-1] == (*run, b)
                                  and len(by_run[key]) == len(images[model]))
                    totals = [_total(by_run[(*run, b, r)].values()) for r in reps]
                    if totals:
                        row = _row(model, name, eps, b, totals, len(images[model]),
                                   run in white_box)
                        if b == budgets[-1]:
                            row.update(_visibility(seen_by[run]))
                        result.rows.append(row)
                if histories[run]:
                    label = curve_label(name, eps, sweep) + (" (white-box)" if run in white_box else "")
                    result.curves.setdefault(model, {})[label] = _mean_curve(histories[run])
        if scored[model] - {"labels"}:  # images without labels: scored against the prediction
            for row in result.rows[first:]:
                row["scored_against"] = "+".join(sorted(scored[model]))
    return result


def _total(confusions: Iterable[torch.Tensor]) -> torch.Tensor:
    """The sum of per-image confusion matrices (a repeat's are never none)."""
    return sum(confusions, torch.zeros((), dtype=torch.long))


def _row(model: str, attack: str, eps: float | None, budget: int, totals: list[torch.Tensor],
         images: int, white_box: bool = False) -> dict[str, Any]:
    mious = [100 * float(mean_iou(t)) for t in totals]
    paccs = [100 * float(pixel_accuracy(t)) for t in totals]
    return {
        "model": model, "attack": attack, "eps": eps, "budget": budget, "images": images,
        "repeats": len(totals),
        "miou_mean": statistics.fmean(mious),
        "miou_std": statistics.pstdev(mious) if len(mious) > 1 else 0.0,
        "pacc_mean": statistics.fmean(paccs),
        "white_box": white_box,
    }


def white_box_gaps(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per decision-based row: how many mIoU points it is above the best white-box row of the
    same model, ε and budget (`gap`, and that row's attack as `reference`). Empty when the
    rows hold no white-box result."""
    best: dict[tuple, dict[str, Any]] = {}
    for r in rows:
        key = (r["model"], r.get("eps"), r["budget"])
        if r.get("white_box") and (key not in best or r["miou_mean"] < best[key]["miou_mean"]):
            best[key] = r
    return [{"model": r["model"], "attack": r["attack"], "eps": r.get("eps"), "budget": r["budget"],
             "gap": r["miou_mean"] - ref["miou_mean"], "reference": ref["attack"]}
            for r in rows if r["attack"] != "clean" and not r.get("white_box")
            and (ref := best.get((r["model"], r.get("eps"), r["budget"]))) is not None]


def _visibility(values: list[dict[str, float]]) -> dict[str, float]:
    """Mean PSNR (finite values: an unchanged image's is inf, None as results.jsonl stores
    it), SSIM, changed-pixel % and OKLab ΔE of the final images."""
    if not values:
        return {}
    finite = [v["psnr"] for v in values if v["psnr"] is not None and math.isfinite(v["psnr"])]
    out = {
        "psnr": statistics.fmean(finite) if finite else float("inf"),
        "ssim": statistics.fmean(v["ssim"] for v in values),
        "changed_pct": 100 * statistics.fmean(v["changed"] for v in values),
    }
    if all("delta_e" in v for v in values):  # records written before segtk measured colour lack it
        out["delta_e"] = statistics.fmean(v["delta_e"] for v in values)
        out["delta_chroma"] = statistics.fmean(v["delta_chroma"] for v in values)
    return out


def _mean_curve(histories: list[list[float]]) -> list[float]:
    length = max(len(h) for h in histories)
    padded = [h + [h[-1]] * (length - len(h)) for h in histories if h]
    return [100 * statistics.fmean(col) for col in zip(*padded)]


def write_outputs(result: BenchResult, out: Path) -> list[Path]:
    """table.csv, table.json, curves.json and curves.png (proxy vs. queries, like the paper)."""
    cols = ["model", "attack", "eps", "budget", "miou_mean", "miou_std", "pacc_mean", "images",
            "repeats", "psnr", "ssim", "changed_pct", "delta_e", "delta_chroma", "white_box"]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=cols, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in result.rows:
        writer.writerow({c: f"{row[c]:.4f}" if isinstance(row.get(c), float) and c != "eps"
                         else row.get(c, "") for c in cols})
    atomic_write_bytes(out / layout.TABLE_CSV, buf.getvalue().encode())
    atomic_write_json(out / layout.TABLE_JSON, result.rows)  # strict: an unchanged image's PSNR is inf
    atomic_write_json(out / layout.CURVES_JSON, result.curves, indent=None)
    plot_curves(result.curves, out / layout.CURVES_PNG)
    return [out / layout.TABLE_CSV, out / layout.TABLE_JSON, out / layout.CURVES_PNG]


def plot_curves(curves: dict[str, dict[str, list[float]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, max(len(curves), 1), figsize=(6 * max(len(curves), 1), 4.2), squeeze=False)
    for ax, (model, by_attack) in zip(axes[0], curves.items()):
        for name, curve in by_attack.items():
            ax.plot(range(1, len(curve) + 1), curve, label=name, lw=2 if name == "dla" else 1.2,
                    ls="--" if name.endswith("(white-box)") else "-")
        ax.set_title(brief_spec(model), fontsize=9)
        ax.set_xlabel("queries (white-box: forward and backward passes)")
        ax.set_ylabel("mean per-image mIoU % (proxy, float candidates)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)


PERTURBATION_ROW = "perturbation, amplified"
_INK, _MUTED = (20, 24, 31), (90, 100, 112)


@dataclass(frozen=True)
class SheetLayout:
    """What a contact sheet shows, as its labels and PNG text chunks say: one column per
    entry of `columns` ("clean", then each attack spec), two rows per image (its stored
    adversarial image, then the perturbation amplified to the full grey range), at one ε and
    one budget (the largest), repeat 0."""

    columns: tuple[str, ...]
    images: tuple[str, ...]
    eps: float
    budget: int

    @property
    def rows(self) -> list[str]:
        return [f"{name}: {kind}" for name in self.images
                for kind in ("adversarial image", PERTURBATION_ROW)]

    def title(self) -> str:
        return (f"eps = {self.eps:g} (0-255 scale), budget {self.budget} queries, repeat 0. "
                f"Per image: the stored adversarial image, then the {PERTURBATION_ROW} "
                "((adv - clean) scaled so its largest |value| spans the grey range; grey = "
                "unchanged)")


def sheet_layout(out: Path, data, attacks: Sequence[str], budget: int, eps: float,
                 max_images: int = 3) -> SheetLayout | None:
    """The attacks and images a contact sheet can show: the first images every shown attack
    left a stored image of (an attack that left none, e.g. one recorded before sheets, is
    left out); None when there is nothing to show."""
    sheet_dir = out / layout.SHEET_DIR
    first = list(data.names[:max_images])
    shown = [a for a in attacks if any(sheet_path(sheet_dir, a, eps, budget, n).exists() for n in first)]
    names = [n for n in first if all(sheet_path(sheet_dir, a, eps, budget, n).exists() for a in shown)]
    if not shown or not names:
        return None
    return SheetLayout(("clean", *shown), tuple(names), eps, budget)


def _wrapped(draw: ImageDraw.ImageDraw, text: str, width: int) -> list[str]:
    """`text` in lines at most `width` pixels wide (broken after ; , : = or anywhere)."""
    lines, line = [], ""
    for char in text:
        if line and draw.textlength(line + char) > width:
            cut = max(line.rfind(c) for c in ";,:= ") + 1
            cut = cut if cut > 0 else len(line)
            lines.append(line[:cut])
            line = line[cut:]
        line += char
    return [*lines, line] if line else lines


def write_contact_sheet(out: Path, data, attacks: list[str], budget: int, eps: float,
                        max_images: int = 3, *, path: Path | None = None) -> Path | None:
    """OUT/contact_sheet.png (or `path`): clean image, then each attack's stored adversarial
    image (top) and amplified perturbation (below) at the largest budget and one ε, for the
    first images: strength next to visibility. Labelled: a title band says ε, budget and what
    the rows are, a header names each column's attack, a band on the left names each row's
    image and kind; the same layout is in the PNG's text chunks (`SheetLayout`)."""
    shown = sheet_layout(out, data, attacks, budget, eps, max_images)
    if shown is None:
        return None
    h, w = data.subset(names=[shown.images[0]])[0].image.shape[:2]
    tw = min(max(w, 160), 240)  # wide enough for a label, small enough for a page
    th = max(1, round(h * tw / w))
    probe = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    heads = [_wrapped(probe, c, tw - 8) for c in shown.columns]
    title = _wrapped(probe, shown.title(), tw * len(shown.columns) + 130 - 8)
    left, line = 130, 14
    top = 8 + line * len(title) + 6
    header = top + line * max(len(x) for x in heads) + 6
    sheet = Image.new("RGB", (left + len(shown.columns) * tw, header + 2 * th * len(shown.images)),
                      "white")
    draw = ImageDraw.Draw(sheet)
    for i, text in enumerate(title):
        draw.text((4, 6 + i * line), text, fill=_INK)
    for col, lines in enumerate(heads):
        for i, text in enumerate(lines):
            draw.text((left + col * tw + 4, top + i * line), text, fill=_INK)
    for row, name in enumerate(shown.images):
        clean = data.subset(names=[name])[0].image
        tiles = [(clean, np.full_like(clean, 127))]
        for attack in shown.columns[1:]:
            adv = read_image(sheet_path(out / layout.SHEET_DIR, attack, eps, budget, name))
            tiles.append((adv, amplify(clean, adv)))
        for k, kind in enumerate(("adversarial", PERTURBATION_ROW.replace(", ", "\n"))):
            y = header + (2 * row + k) * th
            label = _wrapped(probe, name, left - 8) + kind.split("\n")
            for i, text in enumerate(label):
                draw.text((4, y + 4 + i * line), text, fill=_INK if i == 0 else _MUTED)
            for col, tile in enumerate(t[k] for t in tiles):
                sheet.paste(Image.fromarray(tile).resize((tw, th)), (left + col * tw, y))
    info = PngInfo()
    info.add_text("Title", f"segtk bench attacks contact sheet: {', '.join(shown.columns[1:])}")
    info.add_text("Description", shown.title())
    info.add_itxt("segtk:layout", json.dumps({"columns": list(shown.columns), "rows": shown.rows,
                                               "eps": eps, "budget": budget}))
    buf = io.BytesIO()
    sheet.save(buf, format="PNG", pnginfo=info)
    target = path or out / layout.CONTACT_SHEET
    atomic_write_bytes(target, buf.getvalue())
    return target

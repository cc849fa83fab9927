"""`segtk bench attacks`: attacks × budgets × models × repeats, sharded, resumable.

An attack whose first b queries do not depend on the total budget (`anytime`) runs once per
repeat at the largest budget and the smaller budgets are read off the oracle's checkpoints;
budget-dependent schedules (DLA's T/5 exploration, Square's p schedule) run once per budget.
Every table number is a dataset mIoU over the confusions of the best candidate per image.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from segtk.core import registry
from segtk.jobs.attack import evaluate, image_seed, quantise
from segtk.core.data import batch_tensors, same_size_batches, write_png
from segtk.core.metrics import confusion, mean_iou, pixel_accuracy
from segtk.core.params import build_attack
from segtk.core.runs import RunDir
from segtk.core.specs import cached_segmenter, check_compatible, load_dataset
from segtk.benchmarks.visibility import visibility


@dataclass(frozen=True)
class Shard:
    model: str
    data: str
    split: str | None
    attack: str
    repeat: int
    budget: int  # the budget this run is given
    checkpoints: tuple[int, ...]  # budgets read off this run
    images: tuple[str, ...]
    eps: float
    seed: int
    batch_size: int
    params: tuple[str, ...] = ()
    sheet_dir: str | None = None  # where repeat 0 leaves its adversarial PNGs for the sheet

    def key(self, image: str) -> str:
        return f"{self.model}|{self.attack}|{self.repeat}|{self.budget}|{image}"


def run_shard(shard: Shard) -> list[dict[str, Any]]:
    """Attack one chunk of images; one record per image (runs in a worker)."""
    model = cached_segmenter(shard.model)
    data = load_dataset(shard.data, shard.split).subset(names=shard.images)
    attack = build_attack(shard.attack, budget=shard.budget, eps=shard.eps,
                          seed=shard.seed + shard.repeat, extra=shard.params)
    k, ignore = len(data.classes), data.ignore_index
    records = []
    for batch in same_size_batches(data, range(len(data)), shard.batch_size):
        x, y = batch_tensors(batch, model.device)
        seeds = [image_seed(attack.params.seed, item.name) for item in batch]
        result = attack.run(model, x, y, seeds=seeds, checkpoints=shard.checkpoints,
                            num_classes=k, ignore_index=ignore)
        clean = result.clean_predictions
        clean = (clean if clean is not None else evaluate(model, x)).cpu()
        stored = quantise(result.images, np.stack([it.image for it in batch]), shard.eps)
        for i, item in enumerate(batch):
            if shard.sheet_dir and shard.repeat == 0:
                write_png(Path(shard.sheet_dir) / shard.attack / f"{shard.budget}_{item.name}.png", stored[i])
            records.append({
                "key": shard.key(item.name),
                "model": shard.model, "attack": shard.attack, "repeat": shard.repeat,
                "run_budget": shard.budget, "image": item.name,
                "queries": int(result.queries[i]),
                "clean_confusion": confusion(clean[i], y[i].cpu(), k, ignore)[0].tolist(),
                "confusions": {str(b): c[i].tolist() for b, c in result.checkpoints.items()},
                "history": [round(v, 6) for v in result.history[i]],
                "visibility": visibility(item.image, stored[i]),
            })
    return records


def plan(models: list[str], data: str, split: str | None, attacks: list[str], budgets: list[int],
         repeats: int, images: list[str], chunk: int, eps: float, seed: int, batch_size: int,
         params: tuple[str, ...] = (), sheet_dir: str | None = None) -> list[Shard]:
    budgets = sorted(set(budgets))
    shards = []
    for model in models:
        for name in attacks:
            runs = ([(budgets[-1], tuple(budgets))] if registry.attack(name).anytime
                    else [(b, (b,)) for b in budgets])
            for repeat in range(repeats):
                for budget, checkpoints in runs:
                    for start in range(0, len(images), chunk):
                        shards.append(Shard(model, data, split, name, repeat, budget, checkpoints,
                                            tuple(images[start:start + chunk]), eps, seed,
                                            batch_size, params, sheet_dir))
    return shards


@dataclass
class BenchResult:
    rows: list[dict[str, Any]] = field(default_factory=list)
    curves: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # model -> attack -> proxy


def run_bench(shards: list[Shard], run: RunDir, executor, on_records: Callable[[int], None] | None = None) -> None:
    """Run the shards not finished yet; append their records as they land."""
    done = {r["key"] for r in _records(run)}
    todo = [s for s in shards if any(s.key(img) not in done for img in s.images)]
    if on_records:
        on_records(sum(len(s.images) for s in shards) - sum(len(s.images) for s in todo))
    if todo:
        first = todo[0]
        check_compatible(cached_segmenter(first.model), load_dataset(first.data, first.split).subset(limit=1))
    for records in executor.map(run_shard, todo):
        for rec in records:
            run.append(rec)
        if on_records:
            on_records(len(records))


def _records(run: RunDir) -> Iterable[dict[str, Any]]:
    return run.done(key="key").values()


def aggregate(records: Iterable[dict[str, Any]], shards: list[Shard]) -> BenchResult:
    """Table rows (clean first, then attack × budget, mean ± std over complete repeats) and curves."""
    records = list(records)
    wanted = {(s.model, s.attack, s.budget) for s in shards}
    by_run: dict[tuple, dict[str, torch.Tensor]] = defaultdict(dict)
    clean: dict[str, dict[str, torch.Tensor]] = defaultdict(dict)
    histories: dict[tuple[str, str], list[list[float]]] = defaultdict(list)
    seen_by: dict[tuple[str, str], list[dict[str, float]]] = defaultdict(list)
    max_budget: dict[tuple[str, str], int] = {}
    images: dict[str, set[str]] = defaultdict(set)
    for s in shards:
        max_budget[(s.model, s.attack)] = max(s.budget, max_budget.get((s.model, s.attack), 0))
        images[s.model].update(s.images)
    for rec in records:
        if (rec["model"], rec["attack"], rec["run_budget"]) not in wanted:
            continue
        clean[rec["model"]][rec["image"]] = torch.tensor(rec["clean_confusion"])
        for b, conf in rec["confusions"].items():
            by_run[(rec["model"], rec["attack"], int(b), rec["repeat"])][rec["image"]] = torch.tensor(conf)
        if rec["run_budget"] == max_budget[(rec["model"], rec["attack"])]:
            histories[(rec["model"], rec["attack"])].append(rec["history"])
            if "visibility" in rec:
                seen_by[(rec["model"], rec["attack"])].append(rec["visibility"])
    result = BenchResult()
    budgets = sorted({b for s in shards for b in s.checkpoints})
    models = list(dict.fromkeys(s.model for s in shards))
    attacks = list(dict.fromkeys(s.attack for s in shards))
    for model in models:
        total = sum(clean[model].values())
        if isinstance(total, torch.Tensor):
            result.rows.append(_row(model, "clean", 0, [total], len(clean[model])))
        for name in attacks:
            for b in budgets:
                # a repeat still running (or cut short) would be a mIoU over other images
                reps = sorted(r for (m, a, bb, r) in by_run if (m, a, bb) == (model, name, b)
                              and len(by_run[(m, a, bb, r)]) == len(images[model]))
                totals = [sum(by_run[(model, name, b, r)].values()) for r in reps]
                if totals:
                    row = _row(model, name, b, totals, len(images[model]))
                    if b == budgets[-1]:
                        row.update(_visibility(seen_by[(model, name)]))
                    result.rows.append(row)
            if histories[(model, name)]:
                result.curves.setdefault(model, {})[name] = _mean_curve(histories[(model, name)])
    return result


def _row(model: str, attack: str, budget: int, totals: list[torch.Tensor], images: int) -> dict[str, Any]:
    mious = [100 * float(mean_iou(t)) for t in totals]
    paccs = [100 * float(pixel_accuracy(t)) for t in totals]
    return {
        "model": model, "attack": attack, "budget": budget, "images": images,
        "repeats": len(totals),
        "miou_mean": statistics.fmean(mious),
        "miou_std": statistics.pstdev(mious) if len(mious) > 1 else 0.0,
        "pacc_mean": statistics.fmean(paccs),
    }


def _visibility(values: list[dict[str, float]]) -> dict[str, float]:
    """Mean PSNR (finite values), SSIM, changed-pixel % and OKLab ΔE of the final images."""
    if not values:
        return {}
    finite = [v["psnr"] for v in values if v["psnr"] != float("inf")]
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
    import csv
    import io

    from segtk.core.data import atomic_write_bytes, atomic_write_json

    cols = ["model", "attack", "budget", "miou_mean", "miou_std", "pacc_mean", "images", "repeats",
            "psnr", "ssim", "changed_pct", "delta_e", "delta_chroma"]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=cols, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in result.rows:
        writer.writerow({c: f"{row[c]:.4f}" if isinstance(row.get(c), float) else row.get(c, "")
                         for c in cols})
    atomic_write_bytes(out / "table.csv", buf.getvalue().encode())
    atomic_write_json(out / "table.json", result.rows)  # strict: an unchanged image's PSNR is inf
    atomic_write_json(out / "curves.json", result.curves, indent=None)
    plot_curves(result.curves, out / "curves.png")
    return [out / "table.csv", out / "table.json", out / "curves.png"]


def plot_curves(curves: dict[str, dict[str, list[float]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from segtk.core.render import save_figure

    fig, axes = plt.subplots(1, max(len(curves), 1), figsize=(6 * max(len(curves), 1), 4.2), squeeze=False)
    for ax, (model, by_attack) in zip(axes[0], curves.items()):
        for name, curve in by_attack.items():
            ax.plot(range(1, len(curve) + 1), curve, label=name, lw=2 if name == "dla" else 1.2)
        ax.set_title(model, fontsize=9)
        ax.set_xlabel("queries")
        ax.set_ylabel("mean per-image mIoU (proxy) %")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)


def write_contact_sheet(out: Path, data, attacks: list[str], budget: int, max_images: int = 3) -> Path | None:
    """Clean image, then each attack's adversarial image (top) and amplified perturbation
    (below) at the largest budget, for the first images: strength next to visibility."""
    from PIL import Image, ImageDraw

    from segtk.core.data import read_image
    from segtk.core.render import amplify

    sheet_dir = out / "sheet"
    names = [n for n in data.names[:max_images]
             if all((sheet_dir / a / f"{budget}_{n}.png").exists() for a in attacks)]
    if not names:
        return None
    h, w = data[0].image.shape[:2]
    scale = min(1.0, 240 / w)
    tw, th, header = int(w * scale), int(h * scale), 18
    sheet = Image.new("RGB", ((len(attacks) + 1) * tw, header + 2 * th * len(names)), "white")
    draw = ImageDraw.Draw(sheet)
    for col, title in enumerate(["clean", *attacks]):
        draw.text((col * tw + 4, 3), title, fill="black")
    for row, name in enumerate(names):
        clean = data.subset(names=[name])[0].image
        tiles = [(clean, np.full_like(clean, 127))]
        for attack in attacks:
            adv = read_image(sheet_dir / attack / f"{budget}_{name}.png")
            tiles.append((adv, amplify(clean, adv)))
        for col, (top, bottom) in enumerate(tiles):
            for k, tile in enumerate((top, bottom)):
                img = Image.fromarray(tile).resize((tw, th))
                sheet.paste(img, (col * tw, header + (2 * row + k) * th))
    path = out / "contact_sheet.png"
    sheet.save(path)
    return path

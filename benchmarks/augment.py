"""`segtk bench augment`: one model per augmentation from the same start (Gen4Seg Tab. IV).

1. The edited evaluation subsets are built (or reused) exactly as `segtk bench edits` builds
   them, in OUT/edits/ATTR, from the evaluation data (e.g. CamVid val).
2. For each augmentation (`baseline` = none) a model is fine-tuned from the same start model,
   with the same seed (so the same data order and crops), into OUT/train/LABEL (`segtk train`'s
   job; an interrupted one continues with --resume).
3. The start model and every trained model are scored on Original and each edited subset
   (records in OUT/results.jsonl, resumable: bench edits' `benchmarks.edits.ScoreLine`, since
   the same shards score them), and the table is Tab. IV's layout: one row per
   augmentation, mIoU on Original and each subset, and mR = RmIoU / mIoU(reference) per group
   (appearance: reference Original, or Recon with the diffusion backend; geometry:
   Original-object), as `segtk bench edits` computes it.
4. Gen4Seg Tab. VI is the same rows' mIoU on the original (unedited) evaluation images, all
   of them: one column, printed after Tab. IV and written to table_vi.csv. Original holds only
   the images some attribute could edit, so when that is fewer than all, every image is also
   scored as the subset `original-all` (a Tab. VI column only: Tab. IV and its files keep
   their columns).
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from segtk.benchmarks.edits import (
    ORIGINAL,
    ScoreLine,
    Subset,
    aggregate,
    build_subsets,
    plan,
    run_bench,
)
from segtk.class_names import check_models
from segtk.core import SegtkError, atomic_write_bytes, load_dataset
from segtk.core._build import parse_augment
from segtk.imaging import save_figure
from segtk.jobs.executors import make_executor
from segtk.jobs.train import StepHook, TrainConfig, last_epoch_spec, train
from segtk.storage.layout import (
    MIOU_CHART,
    RESULTS,
    RUN,
    TABLE_CSV,
    TABLE_JSON,
    TABLE_VI,
    TRAIN,
)
from segtk.storage.runs import RunDir, atomic_write_json, load_run_file, read_results

START = "start"
ALL_ORIGINAL = "original-all"  # every evaluation image, unedited (Tab. VI)


@dataclass(frozen=True)
class AugmentBench:
    """The benchmark's settings: `training` is every row's `segtk train` config (its `augment`
    is replaced per row by one of `augments`, augmenter specs, `baseline` = none); the rest
    says how the edited evaluation subsets are built."""

    training: TrainConfig
    augments: tuple[str, ...]
    attributes: tuple[str, ...]
    eval_data: str | None = None  # default: the training data
    eval_split: str | None = "val"
    eval_limit: int | None = None
    values: dict[str, list[str]] = field(default_factory=dict)
    backend: str = "classical"
    # Seeds the evaluation edits apart from the training seed, so every training seed is scored
    # on one test set; None = the training seed (runs made before eval_seed existed did that).
    eval_seed: int | None = 0

    def train_config(self, augment: str) -> TrainConfig:
        return replace(self.training, augment=augment)

    def record(self) -> dict[str, Any]:
        """run.json's config: the training settings flat, under the names they always had."""
        t = self.training.record()
        renamed = {"split": "train_split", "limit": "train_limit"}
        out = {renamed.get(k, k): v for k, v in t.items() if k != "augment"}
        out.update(augments=list(self.augments), attributes=list(self.attributes),
                   eval_data=self.eval_data, eval_split=self.eval_split,
                   eval_limit=self.eval_limit, values=self.values, backend=self.backend)
        if self.eval_seed is not None:  # recorded only when set: older run.json files match
            out["eval_seed"] = self.eval_seed
        return out

    def subset_seed(self) -> int:
        """The seed of the edited evaluation subsets."""
        return self.training.seed if self.eval_seed is None else self.eval_seed


def eval_seed_for(out: str | Path, resume: bool, eval_seed: int | None, seed: int) -> int | None:
    """The evaluation seed a run uses: `eval_seed` if given, else 0 for a new run and the
    recorded one on --resume; None (the training seed) for a resumed run made before
    eval_seed existed, which seeded its subsets with the training seed."""
    record = load_run_file(Path(out) / RUN) if resume else None
    config = (record or {}).get("config", {})
    if record is None or "eval_seed" in config:
        return eval_seed if eval_seed is not None else config.get("eval_seed", 0)
    return None if eval_seed in (None, seed) else eval_seed


def label_of(augment: str) -> str:
    """A folder-safe row name: the augmenter's name, plus a short hash when it has parameters."""
    name, params = parse_augment(augment)
    if not params:
        return name
    digest = hashlib.sha256(augment.strip().encode()).hexdigest()[:6]
    return re.sub(r"[^a-z0-9_-]", "-", name) + "-" + digest


def check_labels(augments: Sequence[str]) -> list[str]:
    labels = [label_of(a) for a in augments]
    if not augments:
        raise SegtkError("--augment names no augmentation", hint="e.g. --augment baseline,cutmix")
    dup = sorted({x for x in labels if labels.count(x) > 1})
    if dup:
        raise SegtkError(f"augmentation {dup[0]!r} is listed twice", hint="list each one once")
    if START in labels:
        raise SegtkError(f"{START!r} is the untrained start model's row, not an augmentation")
    return labels


def run(bench: AugmentBench, out: str | Path, resume: bool = False,
        on_subset: Callable[[str, Any], None] | None = None,
        on_train: Callable[[str, dict[str, Any]], None] | None = None,
        on_step: StepHook | None = None,
        on_records: Callable[[int], None] | None = None,
        on_scoring: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Build subsets, train every augmentation, score, aggregate; returns the table."""
    out = Path(out)
    labels = check_labels(bench.augments)
    if not resume and (out / RESULTS).exists():
        raise SegtkError(f"{out} already holds results",
                         hint="pass --resume to continue that run, --overwrite to start it over, "
                              "or choose another --out")
    training = bench.training
    eval_data = bench.eval_data or training.data
    for data, split in dict.fromkeys([(training.data, training.split), (eval_data, bench.eval_split)]):
        check_models([training.model], load_dataset(data, split, 1), training.classes_from_data,
                     training.device)
    # Records are keyed by model spec, so a resume may add augmentations (the others are kept).
    with RunDir(out, bench.record(), resume=True, may_differ=("augments",), kind="bench-augment"):
        pass
    subsets = build_subsets(eval_data, bench.eval_split, bench.eval_limit, list(bench.attributes),
                            out, bench.backend, bench.values or None, seed=bench.subset_seed(),
                            on_subset=on_subset)
    scored = subsets + every_image(subsets, eval_data, bench.eval_split, bench.eval_limit)
    specs = {START: training.model}
    for folder in trained_earlier(out, labels, training.epochs):  # the table covers them too
        specs[folder.name] = last_epoch_spec(folder)
    for augment, label in zip(bench.augments, labels):
        folder = out / TRAIN / label
        if on_train:
            on_train(label, {"augment": augment, "out": str(folder)})
        train(bench.train_config(augment), folder, resume=(folder / RUN).exists(),
              on_step=on_step)
        specs[label] = last_epoch_spec(folder)
    shards = plan(list(specs.values()), scored, chunk=8, batch_size=4, device=training.device)
    if on_scoring:
        on_scoring(sum(len(s.images) for s in shards))
    with RunDir(out, bench.record(), resume=True, may_differ=("augments",),
                kind="bench-augment") as results:
        run_bench(shards, results, make_executor("inline"), on_records, training.classes_from_data)
        records = list(ScoreLine.keyed(results.done(key="key"), out / RESULTS).values())
    table = aggregate(records, shards)
    return tabulate(table, specs, [s.name for s in subsets])


def every_image(subsets: Sequence[Subset], data: str, split: str | None,
                limit: int | None) -> list[Subset]:
    """Tab. VI's subset: every evaluation image unedited, when Original (the images some
    attribute edited) holds fewer; none when it holds them all (Original is then Tab. VI's)."""
    names = tuple(load_dataset(data, split, limit).names)
    original = next(s for s in subsets if s.name == ORIGINAL)
    if set(original.images) == set(names):
        return []
    return [replace(original, name=ALL_ORIGINAL, images=names)]


def trained_earlier(out: Path, labels: Sequence[str], epochs: int) -> list[Path]:
    """OUT/train/LABEL folders an earlier invocation trained to the end (a --resume may add
    augmentations and leave the earlier ones out of --augment) that `labels` do not list: those
    recording every epoch (their model.spec may not be written yet, see `last_epoch_spec`)."""
    root = out / TRAIN
    if not root.is_dir():
        return []
    return [folder for folder in sorted(root.iterdir())
            if folder.name not in labels and len(read_results(folder / RESULTS, key="key")) >= epochs]


def tabulate(table: dict[str, Any], specs: dict[str, str], subsets: list[str]) -> dict[str, Any]:
    """Rows per augmentation: mIoU per subset and mR per group (Tab. IV)."""
    groups = {(g["model"], g["group"]): g for g in table["groups"]}
    group_names = [g for g in ("appearance", "geometry")
                   if any(k[1] == g for k in groups)]
    rows = []
    for label, spec in specs.items():
        row: dict[str, Any] = {"augmentation": label, "model": spec,
                               "miou": dict(table["miou"].get(spec, {}))}
        for g in group_names:
            info = groups.get((spec, g))
            row[f"mr_{g}"] = info["mr"] if info else None
            row[f"rmiou_{g}"] = info["rmiou"] if info else None
        rows.append(row)
    return {"subsets": subsets, "groups": group_names, "rows": rows,
            "images": table["images"].get(next(iter(specs.values())), {})}


def columns(result: dict[str, Any]) -> list[str]:
    return ["augmentation", *result["subsets"], *(f"mR {g}" for g in result["groups"])]


def table_rows(result: dict[str, Any]) -> list[list[Any]]:
    """The printed table: mIoU % per subset, mR per group with 3 decimals ("" where absent)."""
    rows = []
    for row in result["rows"]:
        rows.append([row["augmentation"], *(row["miou"].get(s) for s in result["subsets"]),
                     *("" if row[f"mr_{g}"] is None else f"{row[f'mr_{g}']:.3f}"
                       for g in result["groups"])])
    return rows


def original_subset(result: dict[str, Any]) -> str:
    """The subset holding every evaluation image unedited: original-all if scored, else Original."""
    return ALL_ORIGINAL if ALL_ORIGINAL in result["images"] else ORIGINAL


def original_title(result: dict[str, Any]) -> str:
    """Table VI's title, with how many images it scores."""
    images = result["images"].get(original_subset(result))
    return (f"mIoU % on all {images} original evaluation images (unedited), one model per "
            "augmentation (Gen4Seg Tab. VI)")


def original_rows(result: dict[str, Any]) -> list[list[Any]]:
    """Gen4Seg Tab. VI: each row's mIoU % on every original (unedited) evaluation image."""
    subset = original_subset(result)
    return [[row["augmentation"], row["miou"].get(subset)] for row in result["rows"]]


def write_original(result: dict[str, Any], path: Path) -> None:
    """Table VI as CSV: augmentation, original (mIoU %, 4 decimals as table.csv), model."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["augmentation", ORIGINAL, "model"])
    for row, (label, miou) in zip(result["rows"], original_rows(result)):
        writer.writerow([label, "" if miou is None else f"{miou:.4f}", row["model"]])
    atomic_write_bytes(path, buf.getvalue().encode())


def write_outputs(result: dict[str, Any], out: Path) -> list[Path]:
    """table.csv, table.json, miou.png and table_vi.csv (Tab. VI) in OUT."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["augmentation", *result["subsets"], *(f"mR_{g}" for g in result["groups"]),
                     "model"])
    for row, values in zip(result["rows"], table_rows(result)):
        mious = [row["miou"].get(s) for s in result["subsets"]]
        mrs = [row[f"mr_{g}"] for g in result["groups"]]
        writer.writerow([values[0], *("" if v is None else f"{v:.4f}" for v in mious + mrs),
                         row["model"]])
    atomic_write_bytes(out / TABLE_CSV, buf.getvalue().encode())
    atomic_write_json(out / TABLE_JSON, result)
    plot(result, out / MIOU_CHART)
    write_original(result, out / TABLE_VI)
    return [out / TABLE_CSV, out / TABLE_JSON, out / MIOU_CHART, out / TABLE_VI]


def plot(result: dict[str, Any], path: Path) -> None:
    """Grouped bars: one group per subset, one bar per augmentation (mR in the legend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    subsets, rows = result["subsets"], result["rows"]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.4 * len(subsets) + 3.5), 4))
    width = 0.8 / max(1, len(rows))
    for j, row in enumerate(rows):
        xs = [i + (j - (len(rows) - 1) / 2) * width for i in range(len(subsets))]
        ys = [row["miou"].get(s, float("nan")) for s in subsets]
        mr = ", ".join(f"mR {row[f'mr_{g}']:.3f}" for g in result["groups"]
                       if row[f"mr_{g}"] is not None)
        ax.bar(xs, ys, width, label=f"{row['augmentation']} ({mr})" if mr else row["augmentation"])
    ax.set_xticks(range(len(subsets)), subsets)
    ax.set_ylabel("mIoU %")
    ax.set_title("mIoU per subset after fine-tuning with each augmentation")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    save_figure(fig, path)

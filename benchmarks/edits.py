"""`segtk bench edits`: models × edited subsets (Gen4Seg robustness tables), sharded, resumable.

1. Each attribute's edited subsets are built with the edit job into OUT/edits/SUBSET (an
   existing one is reused/continued: its config must match). An editor whose values are
   alternatives (appearance: colours, materials, ...) gives one subset, ATTR, with one value
   drawn per image (`pick="one"`, Gen4Seg's one random candidate prompt per image; "all" edits
   every value). An editor whose values are levels (`Editor.levels`, geometry: Size 0.2, 0.4)
   gives one subset per level, ATTR-VALUE, as in Gen4Seg's Table III. A backend with a
   `reference` editor (the diffusion backend's `recon`, DDIM reconstruction of the same images)
   also gets that subset, OUT/edits/recon. With `object_centric` (the default) every subset,
   image-level edits and Recon included, is drawn from the same images: those with a salient
   object (Gen4Seg §IV-A), so the mR reference covers the images the edits do.
2. Every model is scored on Original (the source images that were edited, in any subset),
   Recon (diffusion only) and each subset. Records (one per model, subset and image, with its
   confusion) land in OUT/results.jsonl atomically; --resume skips those done.
3. Tables: dataset mIoU per subset; per group (each editor's `kind`: appearance, e.g. color,
   material, style, weather; geometry, e.g. size, position; a third-party editor joins its
   kind's group) RmIoU = mean mIoU over the group's edited subsets (each level counts as a
   subset, as Tables II/III average Size 0.2, Size 0.4, Position 0.2 and Position 0.4) and
   mR = RmIoU / mIoU(reference) (Gen4Seg Eq. 11), reference = Recon if present, else Original (geometry:
   Original-object, see below).

Geometry subsets are scored on object pixels only (label outside the saved mask = ignore):
the repainted background is not labelled reliably. Their mIoU averages the classes present in
the object labels (`subset_miou`). So that geometry mR compares like with like, the source
images are also scored on their salient object's pixels (subset `original-object`, masks in
OUT/edits/original-object/masks) and that is the geometry reference. Original and Recon are scored on all
labelled pixels, as in the paper.
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from segtk.class_names import check_compatible
from segtk.core import (
    EDIT_KINDS,
    Captioner,
    Dataset,
    Editor,
    PromptWriter,
    SegtkError,
    atomic_write_bytes,
    check_prediction,
    confusion,
    load_dataset,
    read_label,
    write_png,
)
from segtk.core._metrics import iou_per_class, mean_iou, mean_robustness
from segtk.core._specs import brief_spec, cached_segmenter
from segtk.editkit import DEFAULT_MIN_AREA, backend_class, prepare_sample
from segtk.imaging import save_figure
from segtk.jobs.batching import batch_tensors, same_size_batches
from segtk.jobs.edit import (
    EditConfig,
    EditRun,
    build_editor,
    build_filter,
    edit_dataset,
    object_things,
    parse_filter_params,
    run_config,
)
from segtk.storage.layout import EDITS, MASKS, MIOU_CHART, TABLE_CSV, TABLE_JSON
from segtk.storage.records import Record
from segtk.storage.runs import RunDir, atomic_write_json

ORIGINAL, RECON, ORIGINAL_OBJECT = "original", "recon", "original-object"


def reference_editor(backend: str) -> str:
    """The editor whose output is `backend`'s robustness reference ("" if none)."""
    cls = backend_class(backend)
    return cls.reference if cls is not None else ""


@dataclass(frozen=True)
class Subset:
    name: str  # original, original-object, recon or the attribute
    data: str  # dataset spec
    split: str | None
    images: tuple[str, ...]
    object_only: bool = False  # score only pixels inside OUT/edits/NAME/masks
    masks: str | None = None
    kind: str = ""  # the editor's kind (its mR group); "" for the references


@dataclass(frozen=True)
class Shard:
    model: str
    subset: Subset
    images: tuple[str, ...]
    batch_size: int = 4
    device: str = "cpu"  # where the model and tensors live (segtk.core._device.resolve_device's name)

    def key(self, image: str) -> str:
        return f"{self.model}|{self.subset.name}|{image}"


@dataclass(kw_only=True)
class ScoreLine(Record):
    """A results.jsonl line of `segtk bench edits` (and of `segtk bench augment`, which scores
    with the same shards): one model's confusion matrix on one image of one subset."""

    KIND = "score record"

    key: str  # MODEL|SUBSET|IMAGE (Shard.key): what --resume skips
    model: str
    subset: str
    kind: str = ""  # the subset's editor kind (its mR group); "" for the references and in
    #                 runs made before it was recorded
    image: str
    confusion: list[list[int]]  # [true class][predicted class]


def run_shard(shard: Shard) -> list[ScoreLine]:
    """Score one chunk of one subset with one model: a record (confusion) per image."""
    model = cached_segmenter(shard.model, shard.device)
    sub = shard.subset
    data = load_dataset(sub.data, sub.split).subset(names=shard.images)
    k, ignore = len(data.classes), data.ignore_index
    records = []
    for batch in same_size_batches(data, range(len(data)), shard.batch_size):
        x, y = batch_tensors(batch, model.device)
        with torch.no_grad():
            pred = check_prediction(x, model.predict(x), model).cpu()
        y = y.cpu()
        for i, item in enumerate(batch):
            label = y[i]
            if sub.object_only and sub.masks:
                mpath = Path(sub.masks) / f"{item.name}.png"
                mask = (torch.from_numpy(read_label(mpath) > 0) if mpath.exists()
                        else torch.zeros_like(label, dtype=torch.bool))
                label = torch.where(mask, label, torch.full_like(label, ignore))
            conf = confusion(pred[i], label, k, ignore)[0]
            records.append(ScoreLine(key=shard.key(item.name), model=shard.model,
                                     subset=sub.name, kind=sub.kind, image=item.name,
                                     confusion=conf.tolist()))
    return records


def subset_values(attr: str, editor: Editor, values: Sequence[str]) -> list[tuple[str, list[str]]]:
    """(subset, values) of one attribute: a subset per level for an editor whose values are
    levels (size-0.2, size-0.4), else one subset holding every value."""
    if editor.levels:
        return [(f"{attr}-{v}", [v]) for v in values]
    return [(attr, list(values))]


def build_subsets(data_spec: str, split: str | None, limit: int | None, attributes: Sequence[str],
                  out: Path, backend: str = "classical", values: dict[str, list[str]] | None = None,
                  filters: Sequence[str] = (), filter_params: Sequence[str] = (), seed: int = 0,
                  editor_params: dict[str, str] | None = None,
                  on_subset: Callable[[str, Any], None] | None = None, pick: str = "one",
                  object_centric: bool = True, prompt_writer: PromptWriter | None = None,
                  prompt_config: dict[str, str] | None = None, min_area: float = DEFAULT_MIN_AREA,
                  objects: str = "largest", things_only: bool = False,
                  captioner: Captioner | None = None,
                  captioner_config: dict[str, Any] | None = None) -> list[Subset]:
    """Edit (or reuse) each attribute's subsets (see the module doc); return Original,
    [Original-object,] [Recon,] and the subsets. Each subset's `kind` is its editor's; the
    backend's reference editor (if any) builds the Recon subset. `prompt_writer` writes the
    prompts of editors that declare prompt templates (`prompt_config`: what their run.json
    records about it, see jobs.edit.prompt_settings). `min_area`, `objects` and `things_only`
    choose the salient object as `segtk edit` does (jobs.edit.EditConfig); `captioner` writes
    every subset's source captions (`captioner_config`: what run.json records about it, see
    jobs.edit.captioner_settings)."""
    data = load_dataset(data_spec, split, limit)
    selection = EditConfig((), min_area=min_area, objects=objects, things_only=things_only)
    things = object_things(data, selection)  # none to pick: refused before anything is edited
    opts = parse_filter_params(list(filters), list(filter_params))
    reference = reference_editor(backend)
    plan_ = [(attr, attr) for attr in attributes] + ([(RECON, reference)] if reference else [])
    built: list[tuple[str, Path, list[str], str]] = []
    for attr, plugin in plan_:
        editor = build_editor(plugin, backend, dict(editor_params or {}))
        if editor.kind not in EDIT_KINDS:
            raise SegtkError(f"editor {plugin!r} declares kind {editor.kind!r}",
                             hint=f"an editor's kind is one of {', '.join(EDIT_KINDS)}; fix "
                                  "the plugin")
        vals = [editor.check_value(v) for v in values[attr]] \
            if values and attr in values else list(editor.values)
        flts = [build_filter(n, opts[n]) for n in filters] if attr != RECON else []
        writer = prompt_writer if prompt_writer is not None and editor.prompt_templates else None
        for subset, subset_vals in subset_values(attr, editor, list(dict.fromkeys(vals))):
            path = out / EDITS / subset
            settings = EditConfig(subset_vals, seed=seed, sheet_rows=6, filters=flts,
                                  prompt_writer=writer, pick=pick, object_centric=object_centric,
                                  min_area=min_area, objects=objects, things_only=things_only,
                                  captioner=captioner)
            # the config `segtk edit` records for the same settings: either resumes the other's
            extra = dict(prompt_config or {}) if writer is not None else {}
            extra.update(captioner_config or {})
            run = EditRun(path, run_config(editor, plugin, backend, data_spec, split, limit,
                                           settings, opts, **extra), resume=True)
            summary = edit_dataset(editor, data, run, settings)
            if on_subset:
                on_subset(subset, summary)
            edited = [r.name for r in summary.edited]
            built.append((subset, path, edited, "" if attr == RECON else editor.kind))
    sources = sorted({n.split("__")[0] for _, _, edited, _ in built for n in edited})
    if not sources:
        raise SegtkError("no image could be edited for any attribute",
                         hint="see OUT/edits/ATTR/skipped.jsonl; try more images or --min-area")
    subsets = [Subset(ORIGINAL, data_spec, split, tuple(s for s in data.names if s in set(sources)))]
    geo_sources = sorted({n.split("__")[0] for _, _, edited, kind in built
                          if kind == "geometry" for n in edited})
    if geo_sources:  # the geometry reference: source images scored on their object's pixels
        masks = object_masks(data, geo_sources, out / EDITS / ORIGINAL_OBJECT / MASKS,
                             min_area, objects, things)
        subsets.append(Subset(ORIGINAL_OBJECT, data_spec, split,
                              tuple(s for s in data.names if s in set(geo_sources)), True, masks))
    for subset, path, edited, kind in built:
        geometry = kind == "geometry"
        if edited:
            subsets.append(Subset(subset, f"edited:{path}", None, tuple(edited), geometry,
                                  str(path / MASKS) if geometry else None, kind))
    return subsets


def object_masks(data: Dataset, sources: Sequence[str], folder: Path,
                 min_area: float = DEFAULT_MIN_AREA, objects: str = "largest",
                 things: Sequence[str] | None = None) -> str:
    """The salient-object masks of the source images (as the object editors pick them: the
    same `min_area`, `objects` rule and `things`, the default --exclude), written as PNGs;
    images without an object get none."""
    index = {n: i for i, n in enumerate(data.names)}
    for name in sources:
        if (folder / f"{name}.png").exists():
            continue
        item = data[index[name]]
        prepared = prepare_sample(name, item.image, item.label, data.classes, "object",
                                  min_area, None, None, data.ignore_index, objects=objects,
                                  things=things)
        mask = getattr(prepared, "mask", None)
        if mask is not None:
            write_png(folder / f"{name}.png", mask.astype(np.uint8) * 255)
    return str(folder)


def plan(models: Sequence[str], subsets: Sequence[Subset], chunk: int = 8,
         batch_size: int = 4, device: str = "cpu") -> list[Shard]:
    return [Shard(m, s, s.images[i:i + chunk], batch_size, device)
            for m in models for s in subsets for i in range(0, len(s.images), chunk)]


def run_bench(shards: Sequence[Shard], run: RunDir, executor,
              on_records: Callable[[int], None] | None = None,
              classes_from_data: bool = False) -> None:
    done = set(run.done(key="key"))
    todo = [s for s in shards if any(s.key(i) not in done for i in s.images)]
    checked: set[str] = set()
    for s in todo:
        if s.model not in checked:
            check_compatible(cached_segmenter(s.model, s.device),
                             load_dataset(s.subset.data, s.subset.split).subset(limit=1),
                             classes_from_data)
            checked.add(s.model)
    if on_records:
        on_records(sum(len(s.images) for s in shards) - sum(len(s.images) for s in todo))
    for records in executor.map(run_shard, todo):
        for rec in records:
            run.append(rec.to_json())
        if on_records:
            on_records(len(records))


def subset_miou(conf: torch.Tensor, object_only: bool = False) -> float:
    """Dataset mIoU (nanmean over classes with a union). Object-only subsets average over the
    classes present in the scored (object) labels: a class that only appears as a wrong
    prediction on object pixels would otherwise add a 0 per class."""
    if not object_only:
        return float(mean_iou(conf))
    ious = iou_per_class(conf)
    present = conf.sum(-1) > 0
    return float(ious[present].mean()) if bool(present.any()) else float("nan")


def aggregate(records: Sequence[ScoreLine], shards: Sequence[Shard]) -> dict[str, Any]:
    """{"miou": {model: {subset: %}}, "images": ..., "groups": [rows with RmIoU and mR]}."""
    wanted = {s.key(i) for s in shards for i in s.images}
    totals: dict[tuple[str, str], torch.Tensor] = {}
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for rec in records:
        if rec.key not in wanted:
            continue
        key = (rec.model, rec.subset)
        conf = torch.tensor(rec.confusion)
        totals[key] = totals[key] + conf if key in totals else conf
        counts[key] += 1
    models = list(dict.fromkeys(s.model for s in shards))
    subsets = list(dict.fromkeys(s.subset.name for s in shards))
    object_only = {s.subset.name for s in shards if s.subset.object_only}
    kinds = {s.subset.name: s.subset.kind for s in shards}
    miou = {m: {s: 100 * subset_miou(totals[(m, s)], s in object_only) for s in subsets
                if (m, s) in totals} for m in models}
    groups = []
    for m in models:
        scores = miou[m]
        for group in EDIT_KINDS:
            edited = [s for s in subsets if kinds[s] == group and s in scores]
            if not edited:
                continue
            if group == "appearance":
                ref = RECON if RECON in scores else ORIGINAL
            else:
                ref = ORIGINAL_OBJECT if ORIGINAL_OBJECT in scores else ORIGINAL
            if ref not in scores:
                continue
            rmiou = float(np.mean([scores[s] for s in edited]))
            groups.append({"model": m, "group": group, "reference": ref,
                           "reference_miou": scores[ref], "subsets": edited,
                           "rmiou": rmiou, "mr": mean_robustness([scores[s] for s in edited],
                                                                 scores[ref])})
    return {"models": models, "subsets": subsets, "miou": miou,
            "images": {m: {s: counts[(m, s)] for s in subsets} for m in models}, "groups": groups}


def write_outputs(result: dict[str, Any], out: Path) -> list[Path]:
    """table.csv (model × subset mIoU, then RmIoU/mR per group), table.json, miou.png."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["model", "subset", "miou", "images"])
    for m in result["models"]:
        for s, v in result["miou"][m].items():
            w.writerow([m, s, f"{v:.4f}", result["images"][m][s]])
    w.writerow([])
    w.writerow(["model", "group", "reference", "reference_miou", "rmiou", "mr", "subsets"])
    for g in result["groups"]:
        w.writerow([g["model"], g["group"], g["reference"], f"{g['reference_miou']:.4f}",
                    f"{g['rmiou']:.4f}", f"{g['mr']:.4f}", " ".join(g["subsets"])])
    atomic_write_bytes(out / TABLE_CSV, buf.getvalue().encode())
    atomic_write_json(out / TABLE_JSON, result)  # strict: a subset without a class is NaN
    plot(result, out / MIOU_CHART)
    return [out / TABLE_CSV, out / TABLE_JSON, out / MIOU_CHART]


def plot(result: dict[str, Any], path: Path) -> None:
    """Grouped bars: one group per subset, one bar per model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    subsets, models = result["subsets"], result["models"]
    fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(subsets) * max(1, len(models)) + 2), 4))
    width = 0.8 / max(1, len(models))
    for j, m in enumerate(models):
        xs = [i + (j - (len(models) - 1) / 2) * width for i in range(len(subsets))]
        ys = [result["miou"][m].get(s, float("nan")) for s in subsets]
        ax.bar(xs, ys, width, label=brief_spec(m))  # no folder of this machine in the legend
    ax.set_xticks(range(len(subsets)), subsets)
    ax.set_ylabel("mIoU %")
    ax.set_title("mIoU per subset (Gen4Seg attribute edits)", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)

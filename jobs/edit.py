"""`segtk edit` over a dataset: prepared samples, edited datasets on disk, resume, contact sheet.

The output folder is an edited dataset that `--data edited:DIR` reads back:

    DIR/images/NAME.png    edited images (RGB)
    DIR/labels/NAME.png    their labels (palette PNGs: class ids, 255 = ignore)
    DIR/masks/NAME.png     the edited object (255) after the edit; all 255 for image-level edits
    DIR/classes.txt        the source dataset's class names
    DIR/manifest.jsonl     one line per edited sample (name, source, attribute, value, prompts,
                           backend, parameters, seed; with --prompt-model also prompt_writer),
                           appended atomically after its PNGs
    DIR/skipped.jsonl      one line per planned edit that was skipped, with its reason
    DIR/source/            the source images that were edited, with their labels (a folder
                           dataset: the "original" to compare with, on the same images)
    DIR/contact_sheet.png  rows of original | edited | label overlay
    DIR/run.json           command, versions, git commit, config (must match on --resume), summary

NAME is SOURCE__VALUE (SOURCE__VALUE__K with --variants K > 1). Every edit draws from its own
random stream, seeded from the run seed and NAME (`image_seed`), so results do not depend on
the order, on --limit or on resuming. With `--pick one` each source image gets one value, drawn
from a stream seeded by the run seed and the source (`picked_value`), as Gen4Seg edits one
randomly chosen candidate prompt per image; `--pick all` (the default) edits every value.
"""

from __future__ import annotations

import inspect
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from segtk.core import (
    Captioner,
    DataError,
    Dataset,
    EditedSample,
    Editor,
    Filter,
    PluginError,
    PromptWriter,
    Sample,
    SegtkError,
    SkipSample,
    atomic_write_bytes,
    build,
    parse_pairs,
    read_image,
    read_label,
    registry,
    write_png,
)
from segtk.core._data import default_palette
from segtk.core._errors import naming
from segtk.editkit import (
    DEFAULT_MIN_AREA,
    OBJECT_RULES,
    Skip,
    allowed_classes,
    prepare_sample,
    thing_classes,
)
from segtk.imaging import overlay
from segtk.jobs.attack import image_seed
from segtk.jobs.edit_records import EditLine, SkipLine
from segtk.storage import runs
from segtk.storage.layout import (
    CLASSES,
    CONTACT_SHEET,
    FILTERS,
    IMAGES,
    LABELS,
    MANIFEST,
    MASKS,
    SKIPPED,
    SOURCE,
)

PICKS = ("all", "one")
DEFAULT_PROMPT_WRITER = "lm"  # segtk-lm-prompts: a local chat LM in the --prompt-model folder


def sample_name(source: str, value: str, variant: int, variants: int) -> str:
    return f"{source}__{value}" if variants == 1 else f"{source}__{value}__{variant}"


def picked_value(values: Sequence[str], seed: int, source: str) -> str:
    """The one value `--pick one` edits on `source`: a uniform draw from its own stream, so it
    depends on neither the order of the images nor on --limit nor on resuming."""
    return values[int(np.random.default_rng(image_seed(seed, f"{source}|pick")).integers(len(values)))]


def jsonable(value: Any) -> Any:
    """Metadata as plain JSON types (numpy scalars and arrays included)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist()) if value.size <= 64 else f"array{list(value.shape)}"
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def append_line(path: Path, record: EditLine | SkipLine) -> None:
    """One JSON line, whole or not at all (see runs.append_line)."""
    runs.append_line(path, jsonable(record.to_json()))


class EditRun(runs.RunDir):
    """An edit output folder: a RunDir of kind "edit" whose results are the manifests.

    `segtk edit` makes one, and so does `segtk bench edits` for each attribute (OUT/edits/ATTR),
    with the same config for the same settings (`run_config`): either command resumes (and
    `segtk report` reads) the other's folder. Locked for its life (close it to release), strict
    about run.json and the manifests; a torn last manifest line is dropped on resume.
    """

    RESULTS = (MANIFEST, SKIPPED)
    HOLDS = "an edited dataset"

    def __init__(self, path: str | Path, config: dict[str, Any], resume: bool) -> None:
        super().__init__(path, jsonable(config), resume, kind="edit")

    def done(self, key: str = "name") -> dict[str, dict[str, Any]]:
        """The edited samples' lines by name (manifest.jsonl)."""
        return super().done(key)

    def skipped(self) -> dict[str, dict[str, Any]]:
        """The skipped edits' lines by name (skipped.jsonl)."""
        return runs.read_results(self.path / SKIPPED, key="name", repair=not self.read_only)

    def edits(self) -> dict[str, EditLine]:
        """The edited samples by name."""
        return EditLine.keyed(self.done(), self.path / MANIFEST)

    def skips(self) -> dict[str, SkipLine]:
        """The skipped edits by name."""
        return SkipLine.keyed(self.skipped(), self.path / SKIPPED)


def run_config(editor: Editor, plugin: str, backend: str, data: str, split: str | None,
               limit: int | None, settings: EditConfig,
               filter_options: Mapping[str, Mapping[str, str]] | None = None,
               **extra: Any) -> dict[str, Any]:
    """The config an edit run's run.json records (and --resume compares): one function for
    `segtk edit` and `segtk bench edits`, so their folders are interchangeable. Filters are
    recorded by their `parameters()` (else the options given, `filter_options`) and only when
    used, like `pick`, `object_centric` and `extra` settings (e.g. prompt_model), so runs
    without them resume as before."""
    config: dict[str, Any] = {
        "plugin": plugin, "values": list(settings.values), "backend": backend, "data": data,
        "split": split, "limit": limit, "variants": settings.variants, "seed": settings.seed,
        "min_area": settings.min_area,
        "exclude": None if settings.exclude is None else list(settings.exclude),
        "classes": None if settings.only is None else list(settings.only),
        "params": editor.parameters(), "save_sources": settings.save_sources}
    if settings.pick != "all" and len(settings.values) > 1:  # one value: the same edits
        config["pick"] = settings.pick
    if settings.objects != "largest":  # recorded only when set, so older runs resume
        config["objects"] = settings.objects
    if settings.things_only:
        config["things_only"] = True
    if settings.object_centric and editor.level != "object":  # object edits are anyway
        config["object_centric"] = True
    if settings.filters:
        config["filters"] = {f.name: f.parameters() if hasattr(f, "parameters")
                             else dict((filter_options or {}).get(f.name, {}))
                             for f in settings.filters}
    config.update(extra)
    return config


@dataclass
class EditSummary:
    planned: int = 0
    edited: list[EditLine] = field(default_factory=list)
    skipped: list[SkipLine] = field(default_factory=list)

    def table(self) -> list[tuple[str, int, int]]:
        """(row, edits, source images): edited, then each skip reason."""
        rows = [("edited", len(self.edited), len({r.source for r in self.edited}))]
        reasons = Counter(r.reason for r in self.skipped)
        for reason in sorted(reasons):
            sources = {r.source for r in self.skipped if r.reason == reason}
            rows.append((f"skipped: {reason}", reasons[reason], len(sources)))
        return rows

    def as_dict(self) -> dict[str, Any]:
        return {"planned": self.planned, "edited": len(self.edited),
                "skipped": dict(Counter(r.reason for r in self.skipped)),
                "sources_edited": len({r.source for r in self.edited})}


NO_EDIT_ADVICE = {  # skip reason -> what to change
    "no-object": "allow other or smaller objects (--classes, --exclude, --min-area)",
    "tiny-object": "allow other or smaller objects (--classes, --exclude, --min-area)",
    "bad-mask": "allow other or smaller objects (--classes, --exclude, --min-area)",
    "no-room": "choose smaller --values",
    "bad-data": "fix the labels (ids must be classes of the dataset or its ignore index)",
    "filtered": "loosen the filters (--filter-param) or drop one (--filter)",
}


def no_edits(summary: EditSummary, out: Path) -> SegtkError:
    """The error of a run in which every planned edit was skipped (an exit 0 would pass for a
    result): how many, why, and where each image's reason is."""
    reasons = Counter(r.reason for r in summary.skipped)
    why = ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items()))
    sources = len({r.source for r in summary.skipped})
    example = summary.skipped[0] if summary.skipped else None
    seen = f" (e.g. {example.source}: {example.detail or example.reason})" if example else ""
    advice = dict.fromkeys(NO_EDIT_ADVICE.get(r.split(":")[0], "") for r in reasons)
    return SegtkError(f"no edit made: all {summary.planned} planned edits of {sources} images were "
                      f"skipped ({why or 'nothing planned'})",
                      hint="; ".join([f"{out / SKIPPED} says why for each image{seen}",
                                      *filter(None, advice)]))


def check_edit(edited: EditedSample, sample: Sample, num_classes: int, who: str) -> None:
    """An editor's output must still be a valid labelled image of the same size."""
    shape = sample.image.shape
    if edited.image.shape != shape or edited.image.dtype != np.uint8:
        raise PluginError(f"editor {who} returned image {edited.image.shape} {edited.image.dtype}, "
                          f"expected {shape} uint8")
    if edited.label.shape != shape[:2] or edited.mask.shape != shape[:2]:
        raise PluginError(f"editor {who} returned a label/mask whose size differs from the image")
    lab = edited.label
    bad = (lab != sample.ignore_index) & ((lab < 0) | (lab >= num_classes))
    if bad.any():
        raise PluginError(f"editor {who} wrote label ids outside the {num_classes} classes")


@dataclass
class EditConfig:
    """How `edit_dataset` edits: the values, variants per value and the run seed; `pick`: "all"
    values on every image, or "one" value drawn per image (`picked_value`); which object is
    edited (`min_area`, `exclude`, `only`: see editkit.prepare_sample); `object_centric`:
    image-level edits too only on images with such an object (Gen4Seg §IV-A selects those for
    every appearance subset, so all subsets and Recon share their images); `objects`: the
    largest region, or the first usable of the instances "ranked" by area, and `things_only`:
    only the dataset's thing classes (`Dataset.things`) may be the object (COCO-EA); what is
    written (`save_sources`, `sheet_rows` of the contact sheet, 0 = none); the noise `filters`;
    a `prompt_writer` that writes the edit prompts instead of the editor's templates; and a
    `captioner` that writes each image's source caption P instead of the class template."""

    values: Sequence[str]
    variants: int = 1
    seed: int = 0
    min_area: float = DEFAULT_MIN_AREA
    exclude: Sequence[str] | None = None
    only: Sequence[str] | None = None
    save_sources: bool = True
    sheet_rows: int = 12
    filters: Sequence[Filter] = ()
    prompt_writer: PromptWriter | None = None
    pick: str = "all"
    object_centric: bool = False
    objects: str = "largest"
    things_only: bool = False
    captioner: Captioner | None = None

    def __post_init__(self) -> None:
        if self.pick not in PICKS:
            raise SegtkError(f"pick={self.pick!r} is unknown",
                             hint="pick all (every value on every image) or one (one value "
                                  "drawn per image)")
        if self.objects not in OBJECT_RULES:
            raise SegtkError(f"objects={self.objects!r} is unknown",
                             hint="objects largest (the largest region) or ranked (the first "
                                  "usable instance, largest first)")


def object_things(dataset: Dataset, config: EditConfig) -> list[str] | None:
    """The classes the object may come from with `things_only` (the dataset's things, within
    --classes/--exclude), None without it; an error where there are none to pick."""
    if not config.things_only:
        return None
    if not dataset.things:
        raise SegtkError(f"--things-only: {dataset.name} declares no thing classes",
                         hint="name the object classes with --classes instead (e.g. "
                              "--classes car,pedestrian)")
    allowed = allowed_classes(dataset.classes, config.exclude, config.only)
    if not thing_classes(dataset.classes, allowed, dataset.things):
        raise SegtkError(f"--things-only: no thing class of {dataset.name} is allowed by "
                         "--classes/--exclude",
                         hint=f"its things: {', '.join(dataset.things)}")
    return list(dataset.things)


def edit_dataset(editor: Editor, dataset: Dataset, run: EditRun, config: EditConfig,
                 on_edit: Callable[[EditLine | SkipLine], None] | None = None) -> EditSummary:
    """Edit every (source image, value, variant) not yet done; return counts over the whole run.

    `config.filters` (Gen4Seg noise filtering) judge each edit before it is written: sample
    filters first (a rejected edit is skipped with reason `filtered:NAME`), then pixel filters,
    which rewrite the saved label (rejected pixels = ignore). Their scores go to the manifest
    under "filters". A filter with `prepare(dataset, cache_dir)` is prepared once on the source
    dataset (e.g. the surrogate filter's per-class losses), cached under OUT/filters.

    `config.prompt_writer` (`segtk edit --prompt-model`) writes the edit prompts instead of the
    editor's `prompt_templates` (so the editor must declare some). The manifest then records
    who wrote each prompt under "prompt_writer" (e.g. "lm:PATH", or "template" where the
    writer fell back to the template). Without it nothing changes. `on_edit` sees each record.
    """
    out = run.path
    values, variants, seed = config.values, config.variants, config.seed
    save_sources, prompt_writer = config.save_sources, config.prompt_writer
    if prompt_writer is not None:
        if not editor.prompt_templates:
            raise SegtkError(f"--prompt-model: editor {editor.name!r} writes its own prompts",
                             hint="use --prompt-model with editors that declare prompt "
                                  "templates (see their README)")
        editor.prompt_writer = prompt_writer
    things = object_things(dataset, config)
    filters = sorted(config.filters, key=lambda f: 0 if f.stage == "sample" else 1)
    for flt in filters:
        if hasattr(flt, "prepare"):
            flt.prepare(dataset, out / FILTERS)
    palette = dataset.palette if dataset.palette is not None else default_palette(len(dataset.classes))
    atomic_write_bytes(out / CLASSES, ("\n".join(dataset.classes) + "\n").encode())
    if save_sources:
        atomic_write_bytes(out / SOURCE / CLASSES, ("\n".join(dataset.classes) + "\n").encode())
    done, skipped = run.edits(), run.skips()
    level = editor.level
    backend = getattr(editor, "backend", "classical")
    backend = backend if isinstance(backend, str) else "editor-defined"
    who = f"{editor.name} ({backend})"
    per_image = 1 if config.pick == "one" else len(values)
    summary = EditSummary(planned=len(dataset) * per_image * variants)

    def finish(record: EditLine | SkipLine) -> None:
        if isinstance(record, SkipLine):
            summary.skipped.append(record)
        else:
            summary.edited.append(record)
        if on_edit:
            on_edit(record)

    def skip(record: SkipLine) -> None:
        append_line(out / SKIPPED, record)
        finish(record)

    for index, source in enumerate(dataset.names):
        chosen = [picked_value(values, seed, source)] if config.pick == "one" else values
        plan = [(v, k, sample_name(source, v, k, variants)) for v in chosen for k in range(variants)]
        todo = []
        for value, k, name in plan:
            if name in done:
                finish(done[name])
            elif name in skipped:
                finish(skipped[name])
            else:
                todo.append((value, k, name))
        if not todo:
            continue
        try:
            item = dataset[index]
            prepared: Sample | Skip = prepare_sample(
                source, item.image, item.label, dataset.classes, level, config.min_area,
                config.exclude, config.only, dataset.ignore_index, objects=config.objects,
                things=things)
            if config.object_centric and level != "object" and not isinstance(prepared, Skip):
                salient = prepare_sample(source, item.image, item.label, dataset.classes,
                                         "object", config.min_area, config.exclude,
                                         config.only, dataset.ignore_index,
                                         objects=config.objects, things=things)
                if isinstance(salient, Skip):  # not an object-centric image (§IV-A)
                    prepared = salient
        except DataError as exc:
            item, prepared = None, Skip("bad-data", exc.message)
        if config.captioner is not None and not isinstance(prepared, Skip):
            prepared.prompt = write_caption(config.captioner, prepared)
        for value, k, name in todo:
            skipped_as = SkipLine(name=name, source=source, value=value, variant=k, reason="")
            if isinstance(prepared, Skip):
                skip(replace(skipped_as, reason=prepared.reason, detail=prepared.detail))
                continue
            sample_seed = image_seed(seed, name)
            try:
                with naming(f"while editing {name}", PluginError, f"editor {who}",
                            hint="edits written so far are kept; fix the editor and rerun with --resume",
                            passthrough=(SkipSample,)):
                    edited = editor.edit(prepared, value, np.random.default_rng(sample_seed))
            except SkipSample as exc:
                skip(replace(skipped_as, reason=exc.reason, detail=exc.detail))
                continue
            check_edit(edited, prepared, len(dataset.classes), who)
            edited, scores, rejected = apply_filters(filters, prepared, edited, name)
            if rejected:
                skip(replace(skipped_as, reason=f"filtered:{rejected}", filters=scores))
                continue
            if save_sources and item is not None:
                src_dir = out / SOURCE
                if not (src_dir / IMAGES / f"{source}.png").exists():
                    write_png(src_dir / LABELS / f"{source}.png", prepared.label, palette)
                    write_png(src_dir / IMAGES / f"{source}.png", prepared.image)
            write_png(out / LABELS / f"{name}.png", edited.label, palette)
            write_png(out / MASKS / f"{name}.png", edited.mask.astype(np.uint8) * 255)
            write_png(out / IMAGES / f"{name}.png", edited.image)
            record = EditLine(
                name=name, source=source, value=value, variant=k,
                source_image=(item.image_path or source) if item is not None else source,
                attribute=editor.attribute or editor.name,
                editor=editor.name,
                kind=editor.kind,
                level=level,
                class_name=prepared.class_name,
                object_area=round(float(prepared.mask.mean()), 5),
                prompt_source=prepared.prompt,
                prompt=edited.prompt,
                backend=backend,
                parameters=edited.metadata,
                seed=sample_seed,
                run_seed=seed,
                prompt_writer=None if prompt_writer is None else edited.prompt_writer or "template",
                captioner=None if config.captioner is None else config.captioner.name,
                filters=scores if filters else None,
            )
            append_line(out / MANIFEST, record)
            finish(record)
    if config.sheet_rows > 0 and summary.edited:
        contact_sheet(out, dataset, summary.edited, palette, config.sheet_rows)
    run.write_run_file(summary.as_dict())
    return summary


def apply_filters(filters: Sequence[Filter], sample: Sample, edited: EditedSample,
                  name: str) -> tuple[EditedSample, dict[str, dict[str, float]], str]:
    """Run the filters: (edited sample with filtered label, scores by filter, rejecting filter)."""
    scores: dict[str, dict[str, float]] = {}
    for flt in filters:
        with naming(f"while filtering {name}", PluginError, f"filter {flt.name}"):
            result = flt.apply(sample, edited)
        scores[flt.name] = dict(result.scores)
        if flt.stage == "sample" and not result.keep:
            return edited, scores, flt.name
        if result.label is not None:
            if result.label.shape != edited.label.shape:
                raise PluginError(f"filter {flt.name} returned a label of another size")
            edited = replace(edited, label=np.asarray(result.label, dtype=np.int64))
    return edited, scores, ""


# --- contact sheet ----------------------------------------------------------------------------


def pick_rows(records: Sequence[EditLine], rows: int) -> list[EditLine]:
    """Up to `rows` records, round-robin over values, each from the least-shown source."""
    by_value: dict[str, list[EditLine]] = {}
    for rec in records:
        by_value.setdefault(str(rec.value), []).append(rec)
    picked: list[EditLine] = []
    used: Counter[str] = Counter()
    queues = list(by_value.values())
    while len(picked) < rows and any(queues):
        for q in queues:
            if q and len(picked) < rows:
                best = min(range(len(q)), key=lambda i: (used[q[i].source], i))
                rec = q.pop(best)
                used[rec.source] += 1
                picked.append(rec)
    return picked


def _tile(image: np.ndarray, width: int) -> np.ndarray:
    h, w = image.shape[:2]
    height = max(1, round(h * width / w))
    return np.asarray(Image.fromarray(image).resize((width, height), Image.Resampling.BILINEAR))


def contact_sheet(out: Path, dataset: Dataset, records: Sequence[EditLine],
                  palette: np.ndarray, rows: int = 12, width: int = 320) -> Path:
    """DIR/contact_sheet.png: one row per edit, original | edited | label overlay, captioned."""
    index = {n: i for i, n in enumerate(dataset.names)}
    strips = []
    for rec in pick_rows(records, rows):
        original = dataset[index[rec.source]].image if rec.source in index else None
        edited = read_image(out / IMAGES / f"{rec.name}.png")
        label = read_label(out / LABELS / f"{rec.name}.png")
        if original is None or original.shape != edited.shape:
            original = np.zeros_like(edited)
        tiles = [_tile(a, width) for a in (original, edited,
                                           overlay(edited, label, palette, 0.5, dataset.ignore_index))]
        row = np.concatenate([np.pad(t, ((0, 0), (0, 4), (0, 0)), constant_values=255)
                              for t in tiles], axis=1)
        head = Image.new("RGB", (row.shape[1], 16), "white")
        text = f"{rec.name}   {rec.class_name or 'image'} -> {rec.value}"
        ImageDraw.Draw(head).text((4, 2), text, fill=(0, 0, 0))
        strips += [np.asarray(head), row, np.full((6, row.shape[1], 3), 255, np.uint8)]
    widest = max(s.shape[1] for s in strips)
    strips = [np.pad(s, ((0, 0), (0, widest - s.shape[1]), (0, 0)), constant_values=255)
              for s in strips]
    header = Image.new("RGB", (widest, 18), "white")
    ImageDraw.Draw(header).text((4, 3), "original | edited | edited label overlay (black = ignore)",
                                fill=(0, 0, 0))
    sheet = np.concatenate([np.asarray(header)] + strips, axis=0)
    path = out / CONTACT_SHEET
    write_png(path, sheet)
    return path


def build_editor(name: str, backend: str, params: Mapping[str, str]) -> Editor:
    """The registered editor `name`, built from its `--param` text by core.build (which
    reads each value as the editor declares it). An editor whose constructor takes a `backend`
    gets `backend`; one that takes `options` gets the keys it does not declare there."""
    # the constructor's own signature: `declared` lists an editor's `defaults`, not `backend`
    takes_backend = "backend" in inspect.signature(registry.editor(name)).parameters
    editor: Editor = build("editor", name, params, **({"backend": backend} if takes_backend else {}))
    return editor


def build_filter(name: str, params: Mapping[str, str]) -> Filter:
    """The registered filter `name`, built from its `--filter-param` text (core.build)."""
    flt: Filter = build("filter", name, params)
    return flt


def parse_filter_params(names: Sequence[str], items: Sequence[str], kind: str = "filter",
                        option: str = "--filter", param_option: str = "--filter-param",
                        example: str = "surrogate.alpha=2") -> dict[str, dict[str, str]]:
    """`--filter-param NAME.KEY=VALUE` items -> {NAME: {KEY: VALUE}} for the given filters (or,
    with `kind` and the options, another kind's: `--metric-param` of `--quality`)."""
    upper = kind.upper()
    syntax = f"write {param_option} {upper}.KEY=VALUE, e.g. {example}"
    out: dict[str, dict[str, str]] = {n: {} for n in names}
    for head, value in parse_pairs(items, param_option, hint=syntax).items():
        fname, dot, key = head.partition(".")
        if not dot or not fname.strip() or not key.strip():
            raise SegtkError(f"cannot read {param_option} {head}={value}: expected "
                             f"{upper}.KEY=VALUE", hint=syntax)
        if fname.strip() not in out:
            raise SegtkError(f"{param_option} {head}={value}: {kind} {fname!r} is not among "
                             f"{option}", hint=f"add {option} {fname}")
        out[fname.strip()][key.strip()] = value
    return out


def write_caption(captioner: Captioner, sample: Sample) -> str:
    """The captioner's caption P of `sample` (one line), naming the image if it fails."""
    with naming(f"while captioning {sample.name}", PluginError, f"captioner {captioner.name}",
                hint="edits written so far are kept; fix the captioner and rerun with --resume"):
        text = captioner.caption(sample.image, sample.mask, sample.class_name)
    if not isinstance(text, str) or not text.strip():
        raise PluginError(f"captioner {captioner.name!r} wrote no caption for {sample.name} "
                          f"({text!r})", hint="a captioner returns one line of text")
    return " ".join(text.split())


def load_captioner(name: str | None, params: Iterable[str] = ()) -> Captioner | None:
    """The registered captioner `name` built with `--captioner-param KEY=VALUE` items (None
    without --captioner; its parameters alone are an error)."""
    items = list(params)
    if name is None:
        if items:
            raise SegtkError("--captioner-param needs --captioner NAME",
                             hint="e.g. --captioner blip --captioner-param model=DIR")
        return None
    captioner: Captioner = build("captioner", name, parse_pairs(items, "--captioner-param",
                                                               error=PluginError))
    return captioner


def captioner_settings(name: str | None, params: Iterable[str] = ()) -> dict[str, Any]:
    """What an edit run's config records about its captioner: nothing without one (so other
    runs resume as before), else its name and parameters."""
    if name is None:
        return {}
    return {"captioner": name, "captioner_params": parse_pairs(list(params), "--captioner-param")}


def load_prompt_writer(name: str | None, model: str | None) -> PromptWriter | None:
    """The registered prompt writer `name` (default "lm") built on `--prompt-model MODEL`."""
    if model is None:
        if name is not None:
            raise SegtkError(f"--prompt-writer {name} needs --prompt-model MODEL",
                             hint="add --prompt-model, e.g. a local chat LM folder for lm")
        return None
    writer: PromptWriter = build("prompt-writer", name or DEFAULT_PROMPT_WRITER, {}, model=model)
    return writer


def prompt_settings(name: str | None, model: str | None) -> dict[str, str]:
    """What an edit run's config records about its prompt writer: nothing without one (so other
    runs resume as before), else the model and a writer other than the default."""
    if model is None:
        return {}
    extra = {"prompt_model": str(model)}
    if (name or DEFAULT_PROMPT_WRITER) != DEFAULT_PROMPT_WRITER:
        extra["prompt_writer"] = str(name)
    return extra

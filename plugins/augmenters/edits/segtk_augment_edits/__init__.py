"""segtk augmenter `edits`: Gen4Seg edited images as training data (the paper's Tab. V/VI use).

Each image of a batch is replaced, with probability `p` (default 0.5: the paper mixes generated
and real samples 50/50), by an edited sample:

- `dir=DIR[;DIR...]`: drawn uniformly from `segtk edit` output folders (read as `edited:DIR`,
  labels as the editor wrote them), prepared like every training sample (the trainer's resize
  and random crop), so scale and size match the batch;
- `editor=NAME[;NAME...]` (`values=a;b`, default all the editor's values): the batch image
  itself is edited on the fly by that editor plugin's classical backend (the object, for object
  editors, is the crop's salient region); an image the editor cannot edit (no object, no room)
  stays as it is.

Labels stay consistent: appearance edits keep them bit for bit, geometry edits move them with
the object (the editor contract). Edit folders must use the training data's class list and,
when the trainer says which split it trains on, come from that split (their run.json records
it): edits of the val images would train on the test set.

`geometry_share` (the paper's Tab. VI mixes appearance and geometry edits 50/50) makes each
replacement first draw its kind, geometry with that probability, then a sample (or editor) of
that kind; unset, samples are drawn uniformly from all folders (or editors), whatever their
kind. The kinds drawn are counted and `drawn()` hands them, with the share drawn, to the trainer,
which records them with each epoch in results.jsonl.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from segtk.core import (
    EDIT_KINDS,
    AugmentContext,
    Augmenter,
    Dataset,
    PluginError,
    SkipSample,
    build,
    convert,
    hookimpl,
    load_dataset,
    registry,
    seeds,
)
from segtk.editkit import Skip, prepare_sample

SHARE_HINT = "e.g. edits:dir=A;B,geometry_share=0.5 (half the edits drawn are geometry edits)"


def _parts(text: str) -> list[str]:
    return [p.strip() for p in str(text).split(";") if p.strip()]


def fit(image: torch.Tensor, label: torch.Tensor, height: int, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Resize a [3,h,w] image (bilinear) and [h,w] label (nearest) to the batch size."""
    if tuple(label.shape) == (height, width):
        return image, label
    image = F.interpolate(image[None], size=(height, width), mode="bilinear", align_corners=False,
                          antialias=True)[0]
    label = F.interpolate(label[None, None].double(), size=(height, width), mode="nearest")[0, 0]
    return image, label.long()


def read_share(raw: Any) -> float | None:
    """`geometry_share` as a number in [0, 1], or None (unset); anything else is refused."""
    share = convert(raw, float | None, "geometry_share", error=PluginError, hint=SHARE_HINT)
    if share is None:
        return None
    if isinstance(share, bool) or not isinstance(share, int | float) or not 0 <= share <= 1:
        raise PluginError(f"edits: geometry_share={raw!r} is not a number in [0, 1]", hint=SHARE_HINT)
    return float(share)


def editor_kind(name: str) -> str | None:
    """'appearance' or 'geometry' for a registered editor plugin (None: not installed)."""
    try:
        return str(registry.editor(name).kind)
    except PluginError:
        return None


def sample_kinds(data: Dataset) -> list[str | None]:
    """Each sample's kind: its manifest line's, else its editor plugin's (None: unknown)."""
    records = {r.get("name"): r for r in data.extra.get("manifest", [])}
    kinds: list[str | None] = []
    for name in data.names:
        record = records.get(name, {})
        kind = record.get("kind") or editor_kind(str(record.get("editor") or record.get("attribute")))
        kinds.append(kind if kind in EDIT_KINDS else None)
    return kinds


def split_name(split: str | None) -> str:
    return repr(split) if split else "none (the reader's default)"


def check_split(folder: str, context: AugmentContext) -> None:
    """Refuse an edit folder whose run.json says it was edited from another split than the one
    the trainer trains on (e.g. val: training on edits of the test images)."""
    if context.data is None:  # set up by hand: the training split is not known
        return
    run_file = Path(folder).expanduser() / "run.json"
    split = context.split or "''"
    fix = (f"edit the training split into a new folder: segtk edit --plugin NAME --data "
           f"{context.data} --split {split} --out DIR, and pass dir=DIR")
    try:
        config = json.loads(run_file.read_text())["config"]
        edited_from = config["split"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise PluginError(f"edits: {folder} does not record the split it was edited from "
                          f"({run_file}: {type(exc).__name__}); training uses split "
                          f"{split_name(context.split)}", hint=fix) from exc
    if (edited_from or None) != (context.split or None):
        raise PluginError(f"edits: {folder} was edited from split {split_name(edited_from)} of "
                          f"{config.get('data')}, but training uses split "
                          f"{split_name(context.split)} of {context.data}", hint=fix)


class Edits(Augmenter):
    """Replace images (prob. `p`) by edited samples from folders or an editor on the fly.

    geometry_share: the probability that a replacement is a geometry edit (size, position)
    rather than an appearance edit (color, material, style, weather), in [0, 1]; unset (none),
    samples are drawn uniformly whatever their kind.
    """

    name = "edits"
    description = "Gen4Seg edits as training samples: dir=EDIT_DIRS or editor=NAMES (on the fly)"
    defaults: ClassVar[dict[str, Any]] = {"dir": "", "editor": "", "values": "", "p": 0.5,
                                          "min_area": 0.2}

    def __init__(self, geometry_share: float | None = None, **params: Any) -> None:
        super().__init__(**params)
        self.share = read_share(geometry_share)
        self.dirs, self.editor_names = _parts(self.params["dir"]), _parts(self.params["editor"])
        if bool(self.dirs) == bool(self.editor_names):
            raise PluginError("edits: give exactly one of dir= and editor=",
                              hint="edits:dir=runs/edit-color;runs/edit-fog (folders from "
                                   "`segtk edit`) or edits:editor=color;weather (on the fly)")
        if self.params["values"] and not self.editor_names:
            raise PluginError("edits: values= goes with editor=", hint="e.g. edits:editor=color,values=red;blue")
        if not 0 <= self.params["p"] <= 1:
            raise PluginError("edits: needs 0 <= p <= 1", hint="e.g. edits:dir=DIR,p=0.5")
        self.pool: list[tuple[Any, int]] = []
        self.pool_kinds: list[str | None] = []  # each pool sample's kind
        self.editors: list[tuple[Any, list[str]]] = []
        self.by_kind: dict[str, list[int]] = {}  # kind -> indices of its candidates
        self.stats: Counter[str] = Counter()

    def setup(self, context: AugmentContext) -> None:
        super().setup(context)
        if self.dirs:
            for d in self.dirs:
                data = load_dataset(f"edited:{d}")
                if list(data.classes) != list(context.classes):
                    raise PluginError(f"edits: {d} has classes {data.classes[:4]}..., the training "
                                      f"data {context.classes[:4]}...",
                                      hint="edit the training dataset itself with `segtk edit`")
                check_split(d, context)
                self.pool += [(data, i) for i in range(len(data))]
                self.pool_kinds += sample_kinds(data)
        else:
            for name in self.editor_names:
                editor = build("editor", name, {})  # classical: the editors' default backend
                wanted = _parts(self.params["values"]) or list(editor.values)
                self.editors.append((editor, [editor.check_value(v) for v in wanted]))
        self.check_kinds()
        self.by_kind = {k: [i for i, kind in enumerate(self.kinds()) if kind == k] for k in EDIT_KINDS}

    def kinds(self) -> list[str | None]:
        """The kind of each candidate: pool samples (dir=) or editors (editor=)."""
        return self.pool_kinds if self.dirs else [e.kind for e, _ in self.editors]

    def check_kinds(self) -> None:
        """With a share set, every candidate's kind must be known and each kind it draws present."""
        if self.share is None:
            return
        kinds, source = self.kinds(), ("dir=" + self.params["dir"] if self.dirs
                                       else "editor=" + self.params["editor"])
        if None in kinds:
            raise PluginError(f"edits: geometry_share is set but some samples of {source} have "
                              "no known kind (no 'kind' in manifest.jsonl, editor not installed)",
                              hint="use folders written by `segtk edit`, or leave geometry_share unset")
        for kind, needed in (("geometry", self.share > 0), ("appearance", self.share < 1)):
            if needed and kind not in kinds:
                raise PluginError(f"edits: geometry_share={self.share:g} draws {kind} edits but "
                                  f"{source} has none", hint=f"add a {kind} edit to {source.split('=')[0]}=, "
                                  f"or set geometry_share={0 if kind == 'geometry' else 1}")

    def parameters(self) -> dict[str, Any]:
        share = {} if self.share is None else {"geometry_share": self.share}  # older runs resume
        return {**self.params, **share, "pool": len(self.pool)}

    def draw(self, rng: np.random.Generator) -> int:
        """The index of the candidate (pool sample or editor) a replacement uses, counting its
        kind: uniform over all (share unset, the draws of earlier versions), else a kind first
        (geometry with probability `geometry_share`), then uniform within it."""
        kinds = self.kinds()
        if self.share is None:
            index = int(rng.integers(len(kinds)))
        else:
            among = self.by_kind["geometry" if rng.random() < self.share else "appearance"]
            index = among[int(rng.integers(len(among)))]
        self.stats[str(kinds[index])] += 1
        return index

    def drawn(self) -> dict[str, Any]:
        """Replaced and skipped samples and the kinds drawn since the last call, with the share
        of geometry edits among them (None before any draw)."""
        counts = {k: self.stats[k] for k in ("replaced", "skipped", *EDIT_KINDS)}
        total = counts["appearance"] + counts["geometry"]
        self.stats = Counter()
        return {**counts, "geometry_share": round(counts["geometry"] / total, 4) if total else None}

    def from_pool(self, rng: np.random.Generator, seed: int, h: int, w: int) -> tuple[torch.Tensor, torch.Tensor]:
        data, index = self.pool[self.draw(rng)]
        item = data[index]
        if self.context.prepare is not None:
            image, label = self.context.prepare(item.image, item.label,
                                                torch.Generator().manual_seed(seed))
        else:
            image = torch.from_numpy(item.image).permute(2, 0, 1).float() / 255
            label = torch.from_numpy(item.label)
        return fit(image, label, h, w)

    def on_the_fly(self, image: torch.Tensor, label: torch.Tensor, rng: np.random.Generator,
                   name: str) -> tuple[torch.Tensor, torch.Tensor] | None:

        editor, values = self.editors[self.draw(rng)]
        value = values[int(rng.integers(len(values)))]
        pixels = (image.permute(1, 2, 0).cpu().numpy() * 255).round().clip(0, 255).astype(np.uint8)
        sample = prepare_sample(name, pixels, label.cpu().numpy(), self.context.classes,
                                getattr(editor, "level", "object"), float(self.params["min_area"]),
                                ignore_index=self.context.ignore_index)
        if isinstance(sample, Skip):
            return None
        try:
            edited = editor.edit(sample, value, rng)
        except SkipSample:
            return None
        out = torch.from_numpy(edited.image.astype(np.float32) / 255).permute(2, 0, 1)
        return out.to(image.dtype), torch.from_numpy(np.asarray(edited.label, dtype=np.int64))

    def apply(self, images: torch.Tensor, labels: torch.Tensor,
              generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        out_images, out_labels = images.clone(), labels.clone()
        h, w = labels.shape[-2:]
        for i, seed in enumerate(seeds(generator, images.shape[0])):
            rng = np.random.default_rng(seed)
            if rng.random() >= self.params["p"]:
                continue
            new: tuple[torch.Tensor, torch.Tensor] | None
            if self.pool:
                new = self.from_pool(rng, seed, h, w)
            else:
                new = self.on_the_fly(images[i], labels[i], rng, f"batch{i}")
            if new is None:
                self.stats["skipped"] += 1
                continue
            self.stats["replaced"] += 1
            out_images[i], out_labels[i] = new[0].to(out_images.dtype), new[1]
        return out_images, out_labels


@hookimpl
def register_augmenters(register) -> None:
    register(Edits)

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
the object (the editor contract). Edit folders must use the training data's class list.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from segtk.core import (
    AugmentContext,
    Augmenter,
    PluginError,
    Skip,
    SkipSample,
    build,
    hookimpl,
    load_dataset,
    prepare_sample,
    seeds,
)


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


class Edits(Augmenter):
    """Replace images (prob. `p`) by edited samples from folders or an editor on the fly."""

    name = "edits"
    description = "Gen4Seg edits as training samples: dir=EDIT_DIRS or editor=NAMES (on the fly)"
    defaults: ClassVar[dict[str, Any]] = {"dir": "", "editor": "", "values": "", "p": 0.5,
                                          "min_area": 0.2}

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
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
        self.editors: list[tuple[Any, list[str]]] = []
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
                self.pool += [(data, i) for i in range(len(data))]
        else:
            for name in self.editor_names:
                editor = build("editor", name, {})  # classical: the editors' default backend
                wanted = _parts(self.params["values"]) or list(editor.values)
                self.editors.append((editor, [editor.check_value(v) for v in wanted]))

    def parameters(self) -> dict[str, Any]:
        return {**self.params, "pool": len(self.pool)}

    def from_pool(self, rng: np.random.Generator, seed: int, h: int, w: int) -> tuple[torch.Tensor, torch.Tensor]:
        data, index = self.pool[int(rng.integers(len(self.pool)))]
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

        editor, values = self.editors[int(rng.integers(len(self.editors)))]
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

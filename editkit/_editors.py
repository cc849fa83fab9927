"""The editor bases the bundled attribute editors share, for any editor plugin to build on.

- `AttributeEditor`: an Editor with backends ("classical" = its own deterministic CPU code,
  or any registered `EditBackend`, e.g. "diffusion"), checked values and `--param` knobs, and
  the appearance guarantee (label and mask bit for bit; classical object edits change pixels
  inside the mask only; a backend's image is kept whole: the diffusion backend blends latents,
  Gen4Seg Eq. 7, and pasting source pixels back would make its edits differ from its Recon
  reference outside the object).
- `GeometryEditor`: moves or rescales the object with one rigid transform (`transform_object`,
  Gen4Seg Eq. 8: scales e_x, e_y and a shift; nearest-neighbour for labels, the uncovered
  area gets the fill label: ignore, or the background class) and repaints what it uncovered
  (`inpaint`: row interpolation or OpenCV, or the backend's `geometry`).
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, ClassVar, Literal

import numpy as np

from segtk.core import EditedSample, Editor, PluginError, Sample, SkipSample
from segtk.core._params import Declared
from segtk.editkit._backends import CLASSICAL, backend_class, make_backend
from segtk.editkit._inpaint import INPAINT_METHODS, inpaint, surroundings_prompt
from segtk.editkit._transforms import Scale, background_fill, transform_object

# --- attribute editors ------------------------------------------------------------------------


class AttributeEditor(Editor):
    """An Editor with backends and checked values and parameters.

    Subclasses set `name`, `attribute`, `kind`, `level`, `values`, `prompt_templates`,
    `defaults` (their classical knobs) and implement `classical(sample, value, rng)`.
    """

    defaults: ClassVar[dict[str, Any]] = {}
    requires: ClassVar[tuple[str, ...]] = ("cv2",)
    install: ClassVar[str] = "pip install opencv-python-headless"

    def __init__(self, backend: str = CLASSICAL, **params: Any) -> None:
        engine_cls = backend_class(backend, self.name)
        # Parameters the editor does not know are the backend's options (refused by the backend
        # if it does not declare them either; without a backend, refused here).
        own = {k: v for k, v in params.items() if k in self.defaults or engine_cls is None}
        self.backend = backend
        # `--param` text (or typed values) read as the type of each default (core.convert)
        self.params = {**self.defaults,
                       **Declared.of_defaults(self.defaults).read(own, "editor", self.name)}
        self.backend_options = {k: v for k, v in params.items() if k not in own}
        self.engine = make_backend(engine_cls, self.backend_options) if engine_cls else None

    def parameters(self) -> dict[str, Any]:
        """What the manifest records about this editor's settings."""
        if self.engine is None:
            return dict(self.params)
        return {**self.params, **{k: v if isinstance(v, int | float | bool) else str(v)
                                  for k, v in self.backend_options.items()}}

    def edit(self, sample: Sample, value: str, rng: np.random.Generator) -> EditedSample:
        value = self.check_value(value)
        prompt, writer = self.write_prompt(sample, value)
        if self.engine is None:
            out = self.classical(sample, value, rng)
        else:
            mask = sample.mask if self.level == "object" else np.ones_like(sample.mask)
            prepared = Sample(sample.name, sample.image, sample.label, mask, sample.classes,
                              sample.class_name, sample.prompt, sample.ignore_index)
            out = self.engine.appearance(prepared, value, sample.prompt, prompt, rng)
        done = self._finish(sample, out, value, prompt)
        done.prompt_writer = writer
        return done

    @abstractmethod
    def classical(self, sample: Sample, value: str, rng: np.random.Generator) -> EditedSample:
        """The classical edit (the image; label and mask are restored by `edit`)."""

    def _finish(self, sample: Sample, out: EditedSample, value: str, prompt: str) -> EditedSample:
        """Appearance guarantee: the label and mask are the sample's, bit for bit; a classical
        object edit is confined to the mask. A backend's image is kept as it made it (the
        diffusion backend blends latents outside the mask, Gen4Seg Eq. 7, so its edits and its
        Recon reference went through the same autoencoder everywhere)."""
        image = check_image(out.image, sample.image.shape, f"{self.name} ({self.backend})")
        if self.level == "object" and self.engine is None:
            image = np.where(sample.mask[..., None], image, sample.image)
        meta = {"backend": self.backend, **self.parameters(), **(out.metadata or {})}
        return EditedSample(image, sample.label.copy(), sample.mask.copy(), value,
                            out.prompt or prompt, meta)


def check_image(image: Any, shape: tuple[int, ...], who: str) -> np.ndarray:
    """`image` as uint8 of `shape`, or a PluginError naming `who` returned something else."""
    arr = np.asarray(image)
    if arr.shape != tuple(shape):
        raise PluginError(f"editor {who} returned an image of shape {arr.shape}, expected {shape}")
    if arr.dtype != np.uint8:
        arr = np.clip(np.round(arr.astype(np.float64)), 0, 255).astype(np.uint8)
    return arr


# --- geometry ---------------------------------------------------------------------------------


class GeometryEditor(AttributeEditor):
    """Moves or rescales the object (`placement`), then repaints the area it uncovered.

    Classical repaint of the object's old area, dilated by `dilate` px so its soft edge goes
    too, computed on the image without the object (so the object never bleeds into the fill);
    the moved object is pasted on top (`inpaint`). `method=rows` (default, `fill_rows`): row-wise linear
    interpolation plus matching grain; `telea` / `ns`: OpenCV inpainting with `radius`.
    Uncovered pixels are labelled `fill`; the dilation ring keeps its label (it was background
    already).

    `border="keep"` (default): an object cut by the image border stays cut by it (a shrunken
    object stays anchored to that border, a moved one moves along it), so no straight cut edge
    appears in the middle of the image.
    """

    kind: ClassVar[Literal["appearance", "geometry"]] = "geometry"
    levels: ClassVar[bool] = True  # values are strengths: one subset each in `bench edits`
    defaults: ClassVar[dict[str, Any]] = {"fill": "auto", "border": "keep", "method": "rows",
                                          "dilate": 3, "radius": 5, "grain": 1.0}
    max_value: ClassVar[float] = 1.0

    def __init__(self, backend: str = CLASSICAL, **params: Any) -> None:
        super().__init__(backend, **params)
        if self.params["border"] not in ("keep", "ignore"):
            raise PluginError(f"{self.name}: border={self.params['border']!r} is unknown",
                              hint="border=keep (objects cut by the image border stay cut by "
                                   "it) or border=ignore")
        if self.params["method"] not in INPAINT_METHODS:
            raise PluginError(f"{self.name}: method={self.params['method']!r} is unknown",
                              hint="method=rows (row interpolation + grain), telea or ns "
                                   "(OpenCV inpainting)")

    def check_value(self, value: str) -> str:
        try:
            v = float(value)
        except (TypeError, ValueError):
            v = float("nan")
        if not 0 < v <= self.max_value:
            raise PluginError(f"editor {self.name!r}: value {value!r} is not a number in "
                              f"(0, {self.max_value:g}]",
                              hint=f"e.g. {', '.join(self.values)}")
        return f"{v:g}"

    @abstractmethod
    def placement(self, sample: Sample, value: float,
                  rng: np.random.Generator) -> tuple[Scale, tuple[int, int]]:
        """(scale, (dx, dy)) for this sample, scale being one factor or (e_x, e_y); raise
        SkipSample if there is none."""

    def classical(self, sample: Sample, value: str, rng: np.random.Generator) -> EditedSample:
        raise NotImplementedError  # geometry editors go through `edit` -> `repaint`

    def edit(self, sample: Sample, value: str, rng: np.random.Generator) -> EditedSample:
        value = self.check_value(value)
        if not sample.mask.any():
            raise SkipSample("bad-mask", "empty object mask")
        prompt, writer = self.write_prompt(sample, value)
        fill = background_fill(sample.classes, sample.ignore_index, self.params["fill"])
        scale, shift = self.placement(sample, float(value), rng)
        moved = transform_object(sample, scale, shift, fill)
        moved.value, moved.prompt = value, prompt
        moved.metadata["background_prompt"] = surroundings_prompt(sample)
        if self.engine is None:
            image = self.repaint(sample, moved, rng)
            extra: dict[str, Any] = {}
        else:
            out = self.engine.geometry(sample, moved, rng)
            image = check_image(out.image, sample.image.shape, f"{self.name} ({self.backend})")
            extra = dict(out.metadata or {})
        meta = {"backend": self.backend, **self.parameters(), **moved.metadata, **extra}
        return EditedSample(image, moved.label, moved.mask, value, prompt, meta, moved.repaint,
                            writer)

    def repaint(self, sample: Sample, moved: EditedSample, rng: np.random.Generator) -> np.ndarray:
        """The image without the object, inpainted over its old place, with the moved object
        pasted on top."""
        p = self.params
        image = inpaint(sample.image, sample.mask, rng, p["method"], int(p["dilate"]),
                        float(p["radius"]), float(p["grain"]))
        image[moved.mask] = moved.image[moved.mask]
        return image

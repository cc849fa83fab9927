"""The editing kit: what the bundled attribute editors share, for any editor plugin to build on.

- `AttributeEditor`: an Editor with backends ("classical" = its own deterministic CPU code,
  or any registered `EditBackend`, e.g. "diffusion"), checked values and `--param` knobs, and
  the appearance guarantee (label and mask bit for bit; classical object edits change pixels
  inside the mask only; a backend's image is kept whole: the diffusion backend blends latents,
  Gen4Seg Eq. 7, and pasting source pixels back would make its edits differ from its Recon
  reference outside the object).
- `GeometryEditor`: moves or rescales the object with one rigid transform (`transform_object`,
  Gen4Seg Eq. 8: scales e_x, e_y and a shift; nearest-neighbour for labels, the uncovered
  area gets the fill label: ignore, or the background class) and repaints what it uncovered
  (`fill_rows`, OpenCV, or the backend's `geometry`).
- helpers: `bbox`, `scales`, `target_box`, `border_sides`, `background_fill`, `surroundings_prompt`,
  `check_image`.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, ClassVar, Literal

import numpy as np
from PIL import Image

from segtk.core import _registry as registry
from segtk.core._build import build
from segtk.core._editing import EditBackend, EditedSample, Editor, Sample, SkipSample
from segtk.core._errors import PluginError, UnknownPlugin
from segtk.core._params import Declared

CLASSICAL = "classical"
BACKEND_KIND = "edit-backend"


# --- backends ---------------------------------------------------------------------------------


def backend_names() -> list[str]:
    """The backend names: "classical" and every registered edit backend (whatever its status)."""
    return [CLASSICAL, *sorted({i.name for i in registry.plugins() if i.kind == BACKEND_KIND})]


def backend_class(name: str, who: str = "") -> type[EditBackend] | None:
    """The registered EditBackend class `name` (None for "classical"), or a PluginError that
    lists the backends, or says what to install."""
    if name == CLASSICAL:
        return None
    names = backend_names()
    if name not in names:
        for_whom = f" for editor {who!r}" if who else ""
        raise UnknownPlugin(f"unknown backend {name!r}{for_whom}",
                            hint=f"backends: {', '.join(names)} (edit-backend plugins add more; "
                                 "see `segtk plugins`)", name=name)
    return registry.edit_backend(name)


def make_backend(cls: type[EditBackend], options: dict[str, Any]) -> EditBackend:
    """The backend `cls` built from `options` as its `Params` declare them (`build`); a
    dependency it imports and lacks becomes a PluginError naming it."""
    try:
        backend: EditBackend = build(BACKEND_KIND, cls.name, options)
        return backend
    except ImportError as exc:
        missing = (exc.name or "a module").split(".")[0]
        also = f"  (or: {cls.install})" if cls.install else ""
        raise PluginError(f"--backend {cls.name} needs {missing}, which is not installed",
                          hint=f"pip install {missing}{also}") from exc


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
        # `--param` text (or typed values) read as the type of each default (core.params)
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


def background_fill(classes: list[str], ignore_index: int, fill: str = "auto") -> int:
    """The label of uncovered pixels: "auto" = the class named background if any, else ignore;
    "ignore"; or a class name."""
    names = [c.strip().lower() for c in classes]
    f = str(fill).strip().lower()
    if f == "ignore":
        return ignore_index
    if f == "auto":
        for candidate in ("background", "_background_", "backgroud"):
            if candidate in names:
                return names.index(candidate)
        return ignore_index
    if f in names:
        return names.index(f)
    raise PluginError(f"fill={fill!r} is not a class of this dataset",
                      hint="use fill=auto, fill=ignore or one of: " + ", ".join(classes))


def bbox(mask: np.ndarray) -> tuple[int, int, int, int]:
    """(x0, y0, x1, y1), end-exclusive, of a non-empty mask."""
    ys, xs = np.nonzero(mask)
    return int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1


def _resize(channel: np.ndarray, size: tuple[int, int], nearest: bool) -> np.ndarray:
    if nearest:
        img = Image.fromarray(channel.astype(np.int32), mode="I")
        return np.asarray(img.resize(size, Image.Resampling.NEAREST), dtype=np.int64)
    img = Image.fromarray(channel.astype(np.float32), mode="F")
    return np.asarray(img.resize(size, Image.Resampling.BOX), dtype=np.float32)


Scale = float | tuple[float, float]  # one factor, or (e_x, e_y) of Gen4Seg Eq. 8


def scales(scale: Scale) -> tuple[float, float]:
    """(e_x, e_y) of a scale given as one factor or a pair."""
    if isinstance(scale, tuple | list):
        return float(scale[0]), float(scale[1])
    return float(scale), float(scale)


def target_box(box: tuple[int, int, int, int], scale: Scale,
               shift: tuple[int, int] = (0, 0)) -> tuple[int, int, int, int]:
    """(x0, y0, width, height) of `box` scaled by `scale` (e_x, e_y) about its centre, then
    shifted."""
    x0, y0, x1, y1 = box
    ex, ey = scales(scale)
    nw, nh = max(1, int(round((x1 - x0) * ex))), max(1, int(round((y1 - y0) * ey)))
    nx0 = int(round((x0 + x1) / 2 - nw / 2)) + int(shift[0])
    ny0 = int(round((y0 + y1) / 2 - nh / 2)) + int(shift[1])
    return nx0, ny0, nw, nh


def border_sides(mask: np.ndarray) -> set[str]:
    """The image borders the object touches ("left", "right", "top", "bottom"): it is cut there."""
    h, w = mask.shape
    x0, y0, x1, y1 = bbox(mask)
    sides = {"left": x0 == 0, "right": x1 == w, "top": y0 == 0, "bottom": y1 == h}
    return {k for k, v in sides.items() if v}


def transform_object(sample: Sample, scale: Scale, shift: tuple[int, int], fill: int) -> EditedSample:
    """Scale the object about its box centre by `scale` (one factor, or (e_x, e_y) of Gen4Seg
    Eq. 8), then move it by `shift` = (dx, dy) px.

    Image, mask and label move together: the mask and the object's label with nearest-neighbour
    sampling, the image with area averaging over object pixels only (no background halo). The
    object is pasted over whatever is at its new place; the area it uncovers (`repaint`) gets
    label `fill` and keeps its old pixels for a backend to repaint. Raises SkipSample
    ("no-room") if the object would leave the image.
    """
    h_img, w_img = sample.mask.shape
    x0, y0, x1, y1 = bbox(sample.mask)
    w, h = x1 - x0, y1 - y0
    nx0, ny0, nw, nh = target_box((x0, y0, x1, y1), scale, shift)
    if nx0 < 0 or ny0 < 0 or nx0 + nw > w_img or ny0 + nh > h_img:
        raise SkipSample("no-room", f"the moved object box ({nx0},{ny0})+{nw}x{nh} leaves the "
                                    f"{w_img}x{h_img} image")
    crop_mask = sample.mask[y0:y1, x0:x1]
    crop_label = sample.label[y0:y1, x0:x1]
    crop_image = sample.image[y0:y1, x0:x1]
    if (nw, nh) == (w, h):
        new_mask, new_label, new_pixels = crop_mask, crop_label, crop_image
    else:
        new_mask = _resize(crop_mask, (nw, nh), nearest=True).astype(bool)
        new_label = _resize(crop_label, (nw, nh), nearest=True)
        weight = _resize(crop_mask.astype(np.float32), (nw, nh), nearest=False)
        chans = [_resize(crop_image[..., c].astype(np.float32) * crop_mask, (nw, nh), False)
                 for c in range(3)]
        avg = np.stack(chans, -1) / np.maximum(weight, 1e-6)[..., None]
        near = np.stack([_resize(crop_image[..., c], (nw, nh), True) for c in range(3)], -1)
        new_pixels = np.where((weight > 1e-6)[..., None], avg, near)
        new_pixels = np.clip(np.round(new_pixels), 0, 255).astype(np.uint8)
    mask_star = np.zeros_like(sample.mask)
    mask_star[ny0:ny0 + nh, nx0:nx0 + nw] = new_mask
    uncovered = sample.mask & ~mask_star
    image = sample.image.copy()
    label = sample.label.copy()
    label[uncovered] = fill
    region = (slice(ny0, ny0 + nh), slice(nx0, nx0 + nw))
    image[region][new_mask] = new_pixels[new_mask]
    label[region][new_mask] = new_label[new_mask]
    ex, ey = scales(scale)
    meta = {"scale": [ex, ey], "shift": [int(shift[0]), int(shift[1])],
            "box": [x0, y0, x1, y1], "new_box": [nx0, ny0, nx0 + nw, ny0 + nh],
            "fill": int(fill), "uncovered_px": int(uncovered.sum())}
    return EditedSample(image, label, mask_star, "", metadata=meta, repaint=uncovered)


def surroundings_prompt(sample: Sample, width: int = 5, top: int = 2) -> str:
    """'a photo of road and building': what surrounds the object, a text for repainting its
    old place (the paper asks a VLM; this is the label's answer)."""
    m = sample.mask
    ring = np.zeros_like(m)
    for dy in range(-width, width + 1):  # a square dilation without OpenCV
        for dx in range(-width, width + 1):
            ring[max(dy, 0):m.shape[0] + min(dy, 0), max(dx, 0):m.shape[1] + min(dx, 0)] |= \
                m[max(-dy, 0):m.shape[0] - max(dy, 0), max(-dx, 0):m.shape[1] - max(dx, 0)]
    ring &= ~m
    ids = sample.label[ring]
    ids = ids[(ids != sample.ignore_index) & (ids >= 0) & (ids < len(sample.classes))]
    values, counts = np.unique(ids, return_counts=True)
    names = [sample.classes[int(v)].replace("_", " ") for v in values[np.argsort(-counts)][:top]]
    return "a photo of " + " and ".join(names) if names else ""


class GeometryEditor(AttributeEditor):
    """Moves or rescales the object (`placement`), then repaints the area it uncovered.

    Classical repaint of the object's old area, dilated by `dilate` px so its soft edge goes
    too, computed on the image without the object (so the object never bleeds into the fill);
    the moved object is pasted on top. `method=rows` (default, `fill_rows`): row-wise linear
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
        if self.params["method"] not in ("rows", "telea", "ns"):
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
        import cv2  # the editors' optional dependency (`requires`)

        k = int(self.params["dilate"])
        hole: np.ndarray = sample.mask.astype(np.uint8)
        if k > 0:
            hole = cv2.dilate(hole, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * k + 1,) * 2))
        method = self.params["method"]
        image: np.ndarray
        if method == "rows":
            image = fill_rows(sample.image, hole.astype(bool), rng, float(self.params["grain"]))
        else:
            flag = cv2.INPAINT_TELEA if method == "telea" else cv2.INPAINT_NS
            bgr = np.ascontiguousarray(sample.image[..., ::-1])
            image = cv2.inpaint(bgr, hole * 255, float(self.params["radius"]), flag)[..., ::-1].copy()
        image[moved.mask] = moved.image[moved.mask]
        return image


def fill_rows(image: np.ndarray, hole: np.ndarray, rng: np.random.Generator,
              grain: float = 1.0) -> np.ndarray:
    """Fill `hole` row by row, interpolating linearly between the known pixels left and right
    of it (constant beyond the last one), plus noise as strong as the image's fine grain
    around the hole (robust MAD estimate, × `grain`). Ground, kerbs, walls and fences
    continue across the hole, which suits street and indoor scenes; rows that are all hole
    copy the nearest filled row."""
    import cv2  # the editors' optional dependency (`requires`)

    out = image.astype(np.float32)
    h, w = hole.shape
    cols = np.arange(w)
    # the values to interpolate from: a 7-px horizontal mean over known pixels only
    known_f = (~hole).astype(np.float32)
    num = cv2.blur(out * known_f[..., None], (7, 1), borderType=cv2.BORDER_REPLICATE)
    den = cv2.blur(known_f, (7, 1), borderType=cv2.BORDER_REPLICATE)[..., None]
    smooth = np.where(den > 1e-3, num / np.maximum(den, 1e-3), out)
    for y in np.nonzero(hole.any(axis=1))[0]:
        known = ~hole[y]
        if not known.any():
            continue
        gaps = hole[y]
        for c in range(3):
            out[y, gaps, c] = np.interp(cols[gaps], cols[known], smooth[y, known, c])
    good = [y for y in range(h) if not hole[y].all()]
    for y in np.nonzero(hole.all(axis=1))[0]:
        if good:
            out[y] = out[min(good, key=lambda g: abs(g - y))]
    if grain > 0 and hole.any():
        ring = cv2.dilate(hole.astype(np.uint8), np.ones((9, 9), np.uint8)).astype(bool) & ~hole
        detail = image.astype(np.float32) - cv2.GaussianBlur(image.astype(np.float32), (0, 0), 1.5)
        # robust (MAD) noise level: the sensor/texture grain, not the edges around the hole
        d = detail[ring] if ring.any() else np.zeros((1, 3), np.float32)
        std = 1.4826 * np.median(np.abs(d - np.median(d, axis=0)), axis=0)
        noise = rng.normal(0.0, 1.0, (h, w, 1)).astype(np.float32) * std * grain
        out[hole] += noise[hole]
    return np.clip(np.round(out), 0, 255).astype(np.uint8)

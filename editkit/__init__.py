"""segtk.editkit: the editing kit, what editor and augmenter plugins share.

The contracts (`Editor`, `EditBackend`, `Sample`, `EditedSample`, `SkipSample`) live in
`segtk.core`; this kit is built on them and holds the shared machinery:

- editor bases: `AttributeEditor` (backends, checked values and `--param` knobs, the appearance
  guarantee) and `GeometryEditor` (moves or rescales the object, then repaints what it
  uncovered: row interpolation with grain, or OpenCV inpainting);
- backends: `CLASSICAL` (the editor's own code) and `backend_class` (a registered backend);
- object transforms: `transform_object` (image, mask and label moved together), `bbox`,
  `target_box`, `border_sides`, `Scale`;
- object selection: `prepare_sample` (the salient object, its mask and caption, or a `Skip`
  with one of `SKIP_REASONS`), `allowed_classes`, `thing_classes`, `DEFAULT_EXCLUDE`,
  `DEFAULT_MIN_AREA`, `OBJECT_RULES`;
- colour: `rgb_to_oklab`, `oklab_to_rgb`, `oklab_to_linear` (OKLab, a perceptual colour space
  where Euclidean distance roughly tracks visible colour difference).

The modules behind it are private (`segtk.editkit._transforms`, ...).
"""

from segtk.editkit._backends import CLASSICAL, backend_class
from segtk.editkit._colour import oklab_to_linear, oklab_to_rgb, rgb_to_oklab
from segtk.editkit._editors import AttributeEditor, GeometryEditor
from segtk.editkit._selection import (
    DEFAULT_EXCLUDE,
    DEFAULT_MIN_AREA,
    OBJECT_RULES,
    SKIP_REASONS,
    Skip,
    allowed_classes,
    prepare_sample,
    thing_classes,
)
from segtk.editkit._transforms import Scale, bbox, border_sides, target_box, transform_object

__all__ = [
    "CLASSICAL",
    "DEFAULT_EXCLUDE",
    "DEFAULT_MIN_AREA",
    "OBJECT_RULES",
    "SKIP_REASONS",
    "AttributeEditor",
    "GeometryEditor",
    "Scale",
    "Skip",
    "allowed_classes",
    "backend_class",
    "bbox",
    "border_sides",
    "oklab_to_linear",
    "oklab_to_rgb",
    "prepare_sample",
    "rgb_to_oklab",
    "target_box",
    "thing_classes",
    "transform_object",
]

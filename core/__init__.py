"""segtk.core: the plugin API, and nothing else.

Everything a plugin builds on is exported here: the contracts (Attack, Segmenter, Editor, Filter,
Augmenter, EditBackend, PromptWriter, DatasetPlugin), the query counter and oracle that make
budgets and ε exact, the PGD loop of white-box attacks, the proxy and metrics, data types and
I/O, the editing kit, parameter parsing, the hook markers and the registry. Plugins import
only `segtk.core` and `segtk.testing` (tests/test_architecture.py enforces it); jobs,
benchmarks, reports, dataset readers and commands live in sibling packages that build on this
one.
"""

from segtk.core.attack import (
    EPS_TOLERANCE,
    Attack,
    AttackParams,
    AttackResult,
    Gradient,
    Oracle,
    Verified,
    project,
    uniform_noise,
)
from segtk.core.augment import AugmentContext, Augmenter, ModuleTrainable, Trainable
from segtk.core.data import (
    Dataset,
    DatasetPlugin,
    Item,
    atomic_write_bytes,
    atomic_write_json,
    check_flat_split,
    default_palette,
    read_image,
    read_label,
    to_tensor,
    to_uint8,
    write_png,
)
from segtk.core.editing import (
    EditBackend,
    EditedSample,
    Editor,
    PromptWriter,
    Sample,
    SkipSample,
)
from segtk.core.editkit import (
    AttributeEditor,
    GeometryEditor,
    bbox,
    border_sides,
    target_box,
    transform_object,
)
from segtk.core.errors import BudgetExceeded, DataError, ModelError, PluginError, SegtkError
from segtk.core.filtering import Filter, FilterResult
from segtk.core.hookspecs import Register, hookimpl
from segtk.core.metrics import (
    ConfusionAccumulator,
    confusion,
    iou_per_class,
    mean_iou,
    mean_robustness,
    pixel_accuracy,
)
from segtk.core.params import build, convert, parse_pairs
from segtk.core.preprocessing import Preprocessing
from segtk.core.proxy import Proxy
from segtk.core.registry import SegmenterPlugin, missing_modules
from segtk.core.render import colourise, overlay, voc_colormap
from segtk.core.runs import RunDir
from segtk.core.segmenter import QueryCounter, Segmenter, check_prediction, labels_from_logits
from segtk.core.specs import load_dataset, load_segmenter
from segtk.core.whitebox import GradientAttack, PGDParams, pixel_cross_entropy

__all__ = [
    "EPS_TOLERANCE",
    "Attack",
    "AttackParams",
    "AttackResult",
    "AttributeEditor",
    "AugmentContext",
    "Augmenter",
    "BudgetExceeded",
    "ConfusionAccumulator",
    "DataError",
    "Dataset",
    "DatasetPlugin",
    "EditBackend",
    "EditedSample",
    "Editor",
    "Filter",
    "FilterResult",
    "GeometryEditor",
    "Gradient",
    "GradientAttack",
    "Item",
    "ModelError",
    "ModuleTrainable",
    "Oracle",
    "PGDParams",
    "PluginError",
    "Preprocessing",
    "PromptWriter",
    "Proxy",
    "QueryCounter",
    "Register",
    "RunDir",
    "Sample",
    "Segmenter",
    "SegmenterPlugin",
    "SegtkError",
    "SkipSample",
    "Trainable",
    "Verified",
    "atomic_write_bytes",
    "atomic_write_json",
    "bbox",
    "border_sides",
    "build",
    "check_flat_split",
    "check_prediction",
    "colourise",
    "confusion",
    "convert",
    "default_palette",
    "hookimpl",
    "iou_per_class",
    "labels_from_logits",
    "load_dataset",
    "load_segmenter",
    "mean_iou",
    "mean_robustness",
    "missing_modules",
    "overlay",
    "parse_pairs",
    "pixel_accuracy",
    "pixel_cross_entropy",
    "project",
    "read_image",
    "read_label",
    "target_box",
    "to_tensor",
    "to_uint8",
    "transform_object",
    "uniform_noise",
    "voc_colormap",
    "write_png",
]

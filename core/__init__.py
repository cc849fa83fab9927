"""segtk.core: the plugin API, one door.

What a plugin builds on is imported from here (`from segtk.core import Attack, Oracle`): the
contracts (Attack, Segmenter, Editor, Filter, Augmenter, EditBackend, PromptWriter,
DatasetPlugin, Metric, Captioner), the query counter and oracle that make budgets and ε exact,
the PGD loop of white-box attacks, the proxy and metrics, data types and I/O, parameter
parsing, the loaders and the builder, the hook markers and the plugin registry (`registry`).
Each name here is used by a plugin, a scaffold template or a contract suite
(tests/test_core_door.py checks). The modules behind it are private (`segtk.core._attack`, …):
plugins never import them; segtk's own packages import from them the helpers that are not
plugin contracts (spec strings, device resolution, summaries).
"""

from segtk.core import _registry as registry
from segtk.core._attack import Attack, AttackParams
from segtk.core._build import build, build_augmenter
from segtk.core._captioner import Captioner
from segtk.core._data import (
    TEMP_SUFFIX,
    Dataset,
    DatasetPlugin,
    Item,
    atomic_write_bytes,
    check_flat_split,
    read_image,
    read_label,
    to_tensor,
    write_png,
)
from segtk.core._device import DEVICE_OPTION
from segtk.core._editing import (
    EDIT_KINDS,
    EditBackend,
    EditedSample,
    Editor,
    PromptWriter,
    Sample,
    SkipSample,
)
from segtk.core._errors import DataError, ModelError, PluginError, SegtkError
from segtk.core._filtering import Filter, FilterResult
from segtk.core._hookspecs import Register, hookimpl
from segtk.core._metrics import ConfusionAccumulator, LabelConfusion, confusion
from segtk.core._oracle import EPS_TOLERANCE, AttackResult, Oracle, project, uniform_noise
from segtk.core._params import (
    convert,
    declared,
    parse_pairs,
)
from segtk.core._plugins import reset_plugin_manager
from segtk.core._preprocessing import Preprocessing, parse_options
from segtk.core._proxy import Proxy
from segtk.core._quality_metric import Metric, MetricResult, QualityPair, load_pretrained
from segtk.core._registry import missing_modules
from segtk.core._render import colourise, voc_colormap
from segtk.core._segmenter import (
    QueryCounter,
    Segmenter,
    SegmenterPlugin,
    check_prediction,
    labels_from_logits,
)
from segtk.core._specs import load_dataset, load_segmenter
from segtk.core._training import AugmentContext, Augmenter, ModuleTrainable, save_safetensors, seeds
from segtk.core._verified import Verified
from segtk.core._whitebox import GradientAttack, PGDParams, pixel_cross_entropy

__all__ = [
    "Attack",
    "AttackParams",
    "AttackResult",
    "AugmentContext",
    "Augmenter",
    "Captioner",
    "ConfusionAccumulator",
    "DEVICE_OPTION",
    "DataError",
    "Dataset",
    "DatasetPlugin",
    "EDIT_KINDS",
    "EPS_TOLERANCE",
    "EditBackend",
    "EditedSample",
    "Editor",
    "Filter",
    "FilterResult",
    "GradientAttack",
    "Item",
    "LabelConfusion",
    "Metric",
    "MetricResult",
    "ModelError",
    "ModuleTrainable",
    "Oracle",
    "PGDParams",
    "PluginError",
    "Preprocessing",
    "PromptWriter",
    "Proxy",
    "QualityPair",
    "QueryCounter",
    "Register",
    "Sample",
    "Segmenter",
    "SegmenterPlugin",
    "SegtkError",
    "SkipSample",
    "TEMP_SUFFIX",
    "Verified",
    "atomic_write_bytes",
    "build_augmenter",
    "build",
    "check_flat_split",
    "check_prediction",
    "colourise",
    "confusion",
    "convert",
    "declared",
    "hookimpl",
    "labels_from_logits",
    "load_dataset",
    "load_pretrained",
    "load_segmenter",
    "missing_modules",
    "parse_options",
    "parse_pairs",
    "pixel_cross_entropy",
    "project",
    "read_image",
    "read_label",
    "registry",
    "reset_plugin_manager",
    "save_safetensors",
    "seeds",
    "to_tensor",
    "uniform_noise",
    "voc_colormap",
    "write_png",
]

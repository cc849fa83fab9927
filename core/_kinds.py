"""The plugin kinds, in one table: each kind's hook, the type of what it registers, how segtk
builds it, its contract suite and its scaffold.

The table drives the hook specifications (core/_hookspecs.py), the registry and its typed
lookups (core/_registry.py), `segtk.core.build`, `segtk plugins new` and `segtk plugins show`;
docs/write-a-plugin.md's hook table is checked against it. A new kind is one row here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from segtk.core._attack import Attack
from segtk.core._captioner import Captioner
from segtk.core._data import DatasetPlugin
from segtk.core._editing import EditBackend, Editor, PromptWriter
from segtk.core._errors import PluginError
from segtk.core._filtering import Filter
from segtk.core._quality_metric import Metric
from segtk.core._segmenter import SegmenterPlugin
from segtk.core._training import Augmenter

Construct = Callable[[type, dict[str, Any]], Any]  # (class, its read parameters) -> the plugin


def keywords(cls: type, values: dict[str, Any]) -> Any:
    """`cls(**values)`: attacks, editors, filters, augmenters, prompt writers (`model=`)."""
    return cls(**values)


def options(cls: type, values: dict[str, Any]) -> Any:
    """`cls(values)`: an edit backend, a metric, a captioner take their options as one dict."""
    return cls(dict(values))


@dataclass(frozen=True)
class Kind:
    """One plugin kind. `base`: what a registration must be, a subclass of it (class kinds, which
    `build` constructs from the user's read parameters) or an instance of it (loaders, `build`
    None: a `SegmenterPlugin` or `DatasetPlugin` whose `load` reads its own spec)."""

    name: str  # "attack": what `segtk plugins` lists and `segtk plugins new KIND` takes
    hook: str  # the hook a plugin answers to register one
    base: type
    build: Construct | None
    suite: str  # the segtk.testing contract suite its tests subclass
    template: str  # the scaffold's folder, commands/scaffold_templates/TEMPLATE
    set_with: str  # how a user sets one of its parameters ("" for loaders: their spec)
    doc: str  # the hook's docstring
    old_hook: str = ""  # a former name of `hook`, still read, with a DeprecationWarning

    @property
    def is_class(self) -> bool:
        return self.build is not None

    @property
    def hooks(self) -> tuple[str, ...]:
        """The hooks read for this kind: `hook`, then `old_hook` if it has one."""
        return (self.hook, self.old_hook) if self.old_hook else (self.hook,)


KINDS: tuple[Kind, ...] = (
    Kind("attack", "register_attacks", Attack, keywords, "AttackSuite", "attack",
         "--param {key}=VALUE", "Register Attack subclasses."),
    Kind("model", "register_models", SegmenterPlugin, None, "SegmenterSuite", "model", "",
         "Register SegmenterPlugin entries, model adapters (a `--model PREFIX:ARG` loader each).",
         old_hook="register_segmenters"),
    Kind("editor", "register_editors", Editor, keywords, "EditorSuite", "editor",
         "--param {key}=VALUE", "Register Editor subclasses."),
    Kind("filter", "register_filters", Filter, keywords, "FilterSuite", "filter",
         "--filter-param {name}.{key}=VALUE", "Register Filter subclasses."),
    Kind("dataset", "register_datasets", DatasetPlugin, None, "DatasetSuite", "dataset", "",
         "Register DatasetPlugin entries (a `--data FORMAT:PATH` reader each). A reader must "
         "refuse a `split` it has no use for (segtk.core.check_flat_split), never ignore it."),
    Kind("augmenter", "register_augmenters", Augmenter, keywords, "AugmenterSuite", "augmenter",
         "--augment {name}:{key}=VALUE",
         "Register Augmenter subclasses (`segtk train --augment NAME`)."),
    Kind("edit-backend", "register_edit_backends", EditBackend, options, "EditBackendSuite",
         "edit-backend", "--param {key}=VALUE",
         "Register EditBackend subclasses (`segtk edit --backend NAME`; built with the `--param` "
         "options the editor does not know, as their `Params` declare them)."),
    Kind("prompt-writer", "register_prompt_writers", PromptWriter, keywords, "PromptWriterSuite",
         "prompt-writer", "",
         "Register PromptWriter subclasses (`segtk edit --prompt-writer NAME --prompt-model "
         "MODEL`; built as `cls(model=MODEL)`)."),
    Kind("metric", "register_metrics", Metric, options, "MetricSuite", "metric",
         "--metric-param {name}.{key}=VALUE",
         "Register Metric subclasses, editing-quality metrics (`segtk bench edits --quality "
         "NAME`; built with their `--metric-param NAME.KEY=VALUE` options)."),
    Kind("captioner", "register_captioners", Captioner, options, "CaptionerSuite", "captioner",
         "--captioner-param {key}=VALUE",
         "Register Captioner subclasses, which write the source caption of an edit (`segtk edit "
         "--captioner NAME`; built with their `--captioner-param KEY=VALUE` options)."),
)
BY_NAME: Mapping[str, Kind] = {k.name: k for k in KINDS}
RENAMED: Mapping[str, str] = {"segmenter": "model"}  # a former kind name -> the kind's name


def renamed(name: str) -> str:
    """The one-line refusal of a former kind name ("" for any other name)."""
    new = RENAMED.get(name)
    return f"the plugin kind {name!r} is called {new!r}: use {new!r}" if new else ""


def kind(name: str) -> Kind:
    """The kind called `name`, or a PluginError listing the kinds (naming the new name of a
    former one)."""
    if name in RENAMED:
        raise PluginError(renamed(name), hint=f"kinds: {', '.join(BY_NAME)}")
    if name not in BY_NAME:
        raise PluginError(f"unknown plugin kind {name!r}", hint=f"kinds: {', '.join(BY_NAME)}")
    return BY_NAME[name]

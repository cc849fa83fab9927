"""The plugin author's kit: contract suites, small fakes and skips, for built-in and
third-party plugins alike. A plugin may import `segtk.core` and `segtk.testing`, nothing else.

    from segtk.testing import AttackSuite, EditorSuite, FilterSuite, SegmenterSuite

    class TestMyAttack(AttackSuite):
        attack_cls = MyAttack          # an Attack subclass
        params = {"some_knob": 3}      # optional overrides

There is a suite for every plugin kind (`AttackSuite`, `SegmenterSuite`, `EditorSuite`,
`FilterSuite`, `DatasetSuite`, `AugmenterSuite`, `EditBackendSuite`, `PromptWriterSuite`,
`MetricSuite`, `CaptionerSuite`); each checks exactly what the matching contract in
`segtk.core` promises (see docs/write-a-plugin.md); pytest collects the checks from the
`Test...` subclass. Installed segtk also registers a pytest plugin (entry point `pytest11`,
`segtk.testing.pytest_plugin`) with the fixtures `tiny_segmenter`, `toy_batch`, `toy_sample`, `toy_dataset`, `shared_path`
and the markers `shared` and `slow`.

Names are imported on first use (PEP 562): pytest loads this package in every run wherever
segtk is installed, and must not pay for torch or hypothesis in runs that never use them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# name -> the module of segtk.testing that defines it
_WHERE = {
    "AttackSuite": "attack_suite",
    "AugmenterSuite": "augmenter_suite",
    "CaptionerSuite": "captioner_suite",
    "DatasetSuite": "dataset_suite",
    "EditBackendSuite": "edit_backend_suite",
    "EditorSuite": "editor_suite",
    "FilterSuite": "filter_suite",
    "MetricSuite": "metric_suite",
    "PromptWriterSuite": "prompt_writer_suite",
    "SegmenterSuite": "segmenter_suite",
    "SHARED": "env",
    "requires_stack": "env",
    "shared": "env",
    "demo_batch": "pinning",
    "result_digest": "pinning",
    **{name: "tiny_models" for name in ("BLIP_WORDS", "tiny_blip", "tiny_clip", "tiny_dinov2")},
    **{name: "fakes" for name in (
        "CAR_CLASSES", "TOY_CLASSES", "TOY_OBJECT", "FakeEntryPoint", "GridSegmenter",
        "RecordingSegmenter", "TinySegmenter", "car_sample", "car_scene", "check_geometry",
        "shifted", "smooth_images", "toy_batch", "toy_dataset", "toy_sample", "toy_scene")},
}

__all__ = [
    "AttackSuite",
    "BLIP_WORDS",
    "AugmenterSuite",
    "CAR_CLASSES",
    "CaptionerSuite",
    "DatasetSuite",
    "EditBackendSuite",
    "EditorSuite",
    "FakeEntryPoint",
    "FilterSuite",
    "GridSegmenter",
    "MetricSuite",
    "PromptWriterSuite",
    "RecordingSegmenter",
    "SHARED",
    "SegmenterSuite",
    "TOY_CLASSES",
    "TOY_OBJECT",
    "TinySegmenter",
    "car_sample",
    "car_scene",
    "check_geometry",
    "demo_batch",
    "requires_stack",
    "result_digest",
    "shared",
    "shifted",
    "smooth_images",
    "tiny_blip",
    "tiny_clip",
    "tiny_dinov2",
    "toy_batch",
    "toy_dataset",
    "toy_sample",
    "toy_scene",
]


def __getattr__(name: str) -> Any:
    """Import the module that defines `name` the first time it is asked for."""
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})


if TYPE_CHECKING:  # what type checkers and editors see
    from segtk.testing.attack_suite import AttackSuite
    from segtk.testing.augmenter_suite import AugmenterSuite
    from segtk.testing.captioner_suite import CaptionerSuite
    from segtk.testing.dataset_suite import DatasetSuite
    from segtk.testing.edit_backend_suite import EditBackendSuite
    from segtk.testing.editor_suite import EditorSuite
    from segtk.testing.env import SHARED, requires_stack, shared
    from segtk.testing.fakes import (
        CAR_CLASSES,
        TOY_CLASSES,
        TOY_OBJECT,
        FakeEntryPoint,
        GridSegmenter,
        RecordingSegmenter,
        TinySegmenter,
        car_sample,
        car_scene,
        check_geometry,
        shifted,
        smooth_images,
        toy_batch,
        toy_dataset,
        toy_sample,
        toy_scene,
    )
    from segtk.testing.filter_suite import FilterSuite
    from segtk.testing.metric_suite import MetricSuite
    from segtk.testing.pinning import demo_batch, result_digest
    from segtk.testing.prompt_writer_suite import PromptWriterSuite
    from segtk.testing.segmenter_suite import SegmenterSuite
    from segtk.testing.tiny_models import BLIP_WORDS, tiny_blip, tiny_clip, tiny_dinov2

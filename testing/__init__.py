"""The plugin author's kit: contract suites, small fakes and skips, for built-in and
third-party plugins alike. A plugin may import `segtk.core` and `segtk.testing`, nothing else.

    from segtk.testing import AttackSuite, EditorSuite, FilterSuite, SegmenterSuite

    class TestMyAttack(AttackSuite):
        attack_cls = MyAttack          # an Attack subclass
        params = {"some_knob": 3}      # optional overrides

Each suite checks exactly what the matching contract in `segtk.core` promises (see
docs/write-a-plugin.md); pytest collects the checks from the `Test...` subclass. Installed
segtk also registers a pytest plugin (entry point `pytest11`, `segtk.testing.pytest_plugin`)
with the fixtures `tiny_segmenter`, `toy_batch`, `toy_sample`, `toy_dataset`, `shared_path`
and the markers `shared` and `slow`.
"""

from segtk.testing.attack_suite import AttackSuite
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
from segtk.testing.segmenter_suite import SegmenterSuite

__all__ = [
    "FakeEntryPoint",
    "CAR_CLASSES",
    "car_sample",
    "car_scene",
    "check_geometry",
    "shifted",
    "SHARED",
    "TOY_CLASSES",
    "TOY_OBJECT",
    "AttackSuite",
    "EditorSuite",
    "FilterSuite",
    "GridSegmenter",
    "RecordingSegmenter",
    "SegmenterSuite",
    "TinySegmenter",
    "requires_stack",
    "shared",
    "smooth_images",
    "toy_batch",
    "toy_dataset",
    "toy_sample",
    "toy_scene",
]

"""segtk's embedded demo: a small CNN trained on procedural street scenes, and those scenes.

Needs nothing outside the package, so `segtk attack --plugin dla` works out of the box.
"""

from __future__ import annotations

from segtk.core import DatasetPlugin, Register, Segmenter, SegmenterPlugin, hookimpl

__version__ = "0.1.0"


def load_segmenter(arg: str = "") -> Segmenter:
    """The shipped demo model; a non-empty arg is read as a path to retrained weights."""
    from segtk_demo.model import WEIGHTS, DemoSegmenter

    return DemoSegmenter(arg or WEIGHTS)


def load_dataset(arg: str = "", split: str | None = None):
    from segtk_demo.datasets import load

    return load(arg, split)


@hookimpl
def register_models(register: Register) -> None:
    register(SegmenterPlugin(
        name="demo",
        load=load_segmenter,
        syntax="demo",
        example="--model demo",
        description="small CNN (144k params) trained on procedural street scenes, 8 classes; "
                    "ships with segtk, no download",
    ))


@hookimpl
def register_datasets(register: Register) -> None:
    register(DatasetPlugin(
        name="demo",
        load=load_dataset,
        syntax="demo[:fresh=N,seed=S]",
        example="--data demo",
        description="8 shipped procedural street scenes, or N freshly generated ones "
                    "(seeds never used in training)",
    ))

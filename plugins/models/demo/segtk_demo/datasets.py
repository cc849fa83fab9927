"""The `--data demo` reader: the shipped demo scenes, or any number of freshly generated ones.

    --data demo                   the images/labels shipped in segtk_demo/data (seeds 0..7)
    --data demo:fresh=16          16 new scenes (seeds 1000..1015), never seen in training
    --data demo:fresh=16,seed=5   16 new scenes from seed 5 on
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from segtk.core import (
    DataError,
    Dataset,
    Item,
    check_flat_split,
    convert,
    parse_pairs,
    read_image,
    read_label,
)
from segtk_demo.scenes import CLASSES, IGNORE_INDEX, PALETTE, TRAIN_SEED_BASE, make_scene

DATA_DIR = Path(__file__).resolve().parent / "data"
SHIPPED_SEEDS = tuple(range(8))
FRESH_SEED = 1000  # default first seed of fresh scenes; also what train.py reports mIoU on


def scene_name(seed: int) -> str:
    return f"scene_{seed:03d}"


def _read_shipped(name: str, image: Path, label: Path) -> Item:
    return Item(name, read_image(image), read_label(label))


def _generate(seed: int) -> Item:
    image, label = make_scene(seed)
    return Item(scene_name(seed), image, label)


THINGS = ("car", "person")  # the countable objects (as Cityscapes annotates them per instance)


def _dataset(pairs: list, extra: dict) -> Dataset:
    return Dataset("demo", list(CLASSES), pairs, IGNORE_INDEX, PALETTE.copy(), extra,
                   list(THINGS))


def shipped(root: Path = DATA_DIR) -> Dataset:
    """The demo PNGs in the package, read lazily; an empty folder is an error, not 0 images."""
    images = sorted((root / "images").glob("*.png"))
    if not images:
        raise DataError(f"{root / 'images'}: no demo images",
                        hint="regenerate them with `python -m segtk_demo.make_data`")
    pairs = [(p.stem, partial(_read_shipped, p.stem, p, root / "labels" / p.name)) for p in images]
    return _dataset(pairs, {"source": "shipped", "root": str(root)})


def fresh(count: int, seed: int = FRESH_SEED) -> Dataset:
    """`count` scenes generated on demand from seeds seed..seed+count-1 (all below training's)."""
    if count < 1:
        raise DataError(f"demo:fresh={count}: need at least one scene")
    if seed < 0 or seed + count > TRAIN_SEED_BASE:
        raise DataError(f"demo: seeds {seed}..{seed + count - 1} are out of range",
                        hint=f"use seeds in [0, {TRAIN_SEED_BASE}); higher ones are for training")
    seeds = range(seed, seed + count)
    pairs = [(scene_name(s), partial(_generate, s)) for s in seeds]
    return _dataset(pairs, {"source": "fresh", "seeds": [seed, seed + count]})


def parse_options(arg: str) -> dict[str, int]:
    """'fresh=16,seed=5' -> {'fresh': 16, 'seed': 5}; unknown keys or non-integers are errors."""
    hint = "syntax is demo[:fresh=N,seed=S]"
    pairs = parse_pairs(filter(None, (p.strip() for p in arg.split(","))), "demo option",
                        ["fresh", "seed"], error=DataError, hint=hint)
    options = {k: convert(v, int, k, error=DataError, hint=hint) for k, v in pairs.items()}
    if "seed" in options and "fresh" not in options:
        raise DataError(f"demo:{arg}: seed= only applies to fresh scenes",
                        hint="e.g. demo:fresh=16,seed=5")
    return options


def load(arg: str = "", split: str | None = None) -> Dataset:
    """The DatasetPlugin loader; the demo scenes have no splits, so any --split is refused."""
    check_flat_split(f"demo:{arg}" if arg else "demo", split, (), "demo")
    options = parse_options(arg or "")
    if "fresh" in options:
        return fresh(options["fresh"], options.get("seed", FRESH_SEED))
    return shipped()

"""The dataset contract suite: what a `segtk.core.DatasetPlugin` (a `--data NAME:ARG` reader)
promises, checked on a small dataset the suite's subclass provides.

    from segtk.testing import DatasetSuite

    class TestMyReader(DatasetSuite):
        def make(self) -> DatasetPlugin:
            return registry.dataset_plugin("mine")     # through the registry

        def arg(self, root: Path) -> str:
            write_a_tiny_dataset(root)                 # root: an empty folder of this check's own
            return str(root)                           # what follows `--data mine:`

Checks: the plugin declares a name, syntax and example (`--data NAME...`); `load(arg, split)`
returns a `Dataset` with images, unique item names and a class list of unique names whose
ignore index is no class id, a palette with a colour per class where it has one and things
among its classes; each item, read by the reader itself (before segtk's own check), is named
as listed, has a uint8 RGB image [H,W,3] and an integer label [H,W] of the same size holding
class ids (< the number of classes) or the ignore index; reading an item twice gives the same
arrays (segtk reads lazily, and reads again on resume); and a split the reader has no use for
is refused, never ignored. `splits` lists the splits to read (None: the reader's default).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from segtk.core import Dataset, DatasetPlugin, Item, SegtkError

NO_SUCH_SPLIT = "no-such-split"


class DatasetSuite:
    """Subclass as `TestSomething` and implement `make()` (and `arg(root)` for a reader of
    files); pytest collects the checks."""

    splits: ClassVar[tuple[str | None, ...]] = (None,)
    max_items: ClassVar[int] = 4  # the items read per split (the first ones)

    def make(self) -> DatasetPlugin:
        raise NotImplementedError(f"{type(self).__name__} must implement make() -> DatasetPlugin")

    def arg(self, root: Path) -> str:
        """What follows `--data NAME:` for a small dataset; write its files under `root`."""
        return ""

    def datasets(self, root: Path) -> list[tuple[str | None, Dataset]]:
        plugin, arg = self.make(), self.arg(root)
        out = []
        for split in self.splits:
            data = plugin.load(arg, split)
            assert isinstance(data, Dataset), \
                f"load({arg!r}, {split!r}) returned {type(data).__name__}, not a Dataset"
            out.append((split, data))
        return out

    def raw_items(self, data: Dataset) -> list[tuple[str, Item]]:
        """(listed name, item) as the reader gives them, before Dataset's own check."""
        return [(name, read()) for name, read in data.pairs[: self.max_items]]

    def test_declares_name_syntax_and_example(self) -> None:
        plugin = self.make()
        assert isinstance(plugin, DatasetPlugin), f"make() returned {type(plugin).__name__}"
        assert isinstance(plugin.name, str) and plugin.name, "name must be a non-empty string"
        assert isinstance(plugin.syntax, str) and plugin.syntax.startswith(plugin.name), \
            f"syntax {plugin.syntax!r} must start with the name {plugin.name!r}"
        assert plugin.example.startswith(f"--data {plugin.name}"), \
            f"example {plugin.example!r} must be `--data {plugin.name}...`"
        assert callable(plugin.load), "load must be callable: load(arg, split) -> Dataset"

    def test_a_dataset_with_classes_and_named_items(self, tmp_path: Path) -> None:
        for split, data in self.datasets(tmp_path):
            where = f"split {split!r}"
            assert len(data) > 0, f"{where}: no items"
            classes = data.classes
            assert isinstance(classes, list) and classes and all(
                isinstance(c, str) and c for c in classes), \
                f"{where}: classes must be a non-empty list of names, got {classes!r}"
            assert len(set(classes)) == len(classes), f"{where}: duplicate class names {classes}"
            ignore = data.ignore_index
            assert isinstance(ignore, int) and not 0 <= ignore < len(classes), \
                f"{where}: ignore_index {ignore!r} must be an int that is no class id"
            names = data.names
            assert all(isinstance(n, str) and n for n in names), f"{where}: item names must be text"
            assert len(set(names)) == len(names), f"{where}: duplicate item names"
            if data.palette is not None:
                palette = np.asarray(data.palette)
                assert palette.ndim == 2 and palette.shape[1] == 3 and \
                    palette.shape[0] >= len(classes), \
                    f"{where}: palette {palette.shape} must have a colour for each class"
            if data.things is not None:
                assert set(data.things) <= set(classes), \
                    f"{where}: things {sorted(set(data.things) - set(classes))} are no classes"

    def test_items_are_images_with_labels_of_their_size(self, tmp_path: Path) -> None:
        for split, data in self.datasets(tmp_path):
            for name, item in self.raw_items(data):
                where = f"split {split!r}, item {name!r}"
                assert isinstance(item, Item), f"{where}: the reader gave {type(item).__name__}"
                assert item.name == name, f"{where}: the item calls itself {item.name!r}"
                image, label = np.asarray(item.image), np.asarray(item.label)
                assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3, \
                    f"{where}: image must be uint8 [H,W,3], got {image.dtype} {image.shape}"
                assert np.issubdtype(label.dtype, np.integer) and label.ndim == 2, \
                    f"{where}: label must be integer [H,W], got {label.dtype} {label.shape}"
                assert label.shape == image.shape[:2], \
                    f"{where}: label {label.shape} is not the image's size {image.shape[:2]}"
                valid = (label == data.ignore_index) | ((label >= 0) & (label < len(data.classes)))
                assert valid.all(), f"{where}: label ids {sorted(set(label[~valid].tolist()))[:8]} " \
                                    f"are neither classes (0-{len(data.classes) - 1}) nor ignore " \
                                    f"({data.ignore_index})"

    def test_same_item_twice(self, tmp_path: Path) -> None:
        for split, data in self.datasets(tmp_path):
            for (name, first), (_, again) in zip(self.raw_items(data), self.raw_items(data),
                                                 strict=True):
                assert np.array_equal(first.image, again.image) and \
                    np.array_equal(first.label, again.label), \
                    f"split {split!r}, item {name!r}: read twice, it differs"

    def test_refuses_a_split_it_has_no_use_for(self, tmp_path: Path) -> None:
        plugin = self.make()
        arg = self.arg(tmp_path)
        with pytest.raises(SegtkError):
            plugin.load(arg, NO_SUCH_SPLIT)
            pytest.fail(f"load({arg!r}, {NO_SUCH_SPLIT!r}) read a dataset: a reader must refuse "
                        "a split it has no use for (segtk.core.check_flat_split)")

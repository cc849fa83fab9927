"""`folder:PATH,void=ID;ID` and `,map=FROM:TO;FROM:TO`: stored label ids mapped as each label is
read (a tool's void id to ignore, a different numbering to classes.txt's), and refused in one
line where they cannot be read or point past the class list."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from segtk.core import DataError, load_dataset, write_png


@pytest.fixture
def stored(tmp_path: Path) -> Path:
    """Three classes, a label holding ids 0, 1, 2 and 11 (a void id outside the class list)."""
    root = tmp_path / "data"
    write_png(root / "images" / "im.png", np.zeros((2, 4, 3), np.uint8))
    write_png(root / "labels" / "im.png", np.array([[0, 1, 2, 11], [11, 2, 1, 0]], np.uint8))
    (root / "classes.txt").write_text("a\nb\nc\n")
    return root


def test_without_a_mapping_the_void_id_is_refused_naming_the_file(stored: Path) -> None:
    with pytest.raises(DataError, match="im.png"):
        load_dataset(f"folder:{stored}")[0]


def test_void_ids_become_ignore(stored: Path) -> None:
    label = load_dataset(f"folder:{stored},void=11")[0].label
    assert label.tolist() == [[0, 1, 2, 255], [255, 2, 1, 0]]


def test_map_sends_each_stored_id_at_once(stored: Path) -> None:
    label = load_dataset(f"folder:{stored},map=11:255;1:2;2:1")[0].label  # 1 and 2 swap
    assert label.tolist() == [[0, 2, 1, 255], [255, 1, 2, 0]]
    both = load_dataset(f"folder:{stored},void=11,map=0:1")[0].label
    assert both.tolist() == [[1, 1, 2, 255], [255, 2, 1, 1]]


def test_a_folder_whose_name_holds_a_comma_is_read_whole(stored: Path) -> None:
    named = stored.rename(stored.parent / "data,v2")
    assert load_dataset(f"folder:{named}").names == ["im"]


@pytest.mark.parametrize(("options", "match"), [
    ("map=11:3", r"map=11:3: 3 is not a class id of .*classes.txt \(0-2\) nor 255"),
    ("map=11", r"map item '11' is not FROM:TO"),
    ("void=x", r"void"),
    ("void=11,map=11:0", r"label id 11 is mapped twice"),
    ("ignore=11", r"ignore"),
])
def test_bad_mappings_are_refused_in_one_line(stored: Path, options: str, match: str) -> None:
    with pytest.raises(DataError, match=match) as info:
        load_dataset(f"folder:{stored},{options}")
    assert "\n" not in info.value.message and info.value.hint

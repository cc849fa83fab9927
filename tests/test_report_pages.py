"""Complete reports: the bench-attacks page after resumes (every attack in its title, tables,
curves and labelled contact sheet, with the visibility table), the train and bench-augment
pages, and no absolute path of the machine on any page or chart."""

from __future__ import annotations

import pytest

from segtk.core import brief_spec


@pytest.mark.parametrize("spec, shown", [
    ("espnet:camvid=/home/me/models/espnet_camvid.safetensors", "espnet:camvid"),
    ("hf:../shared/models/segformer-b0", "hf:segformer-b0"),
    ("/home/me/runs/t/model.spec", "t/model.spec"),
    ("camvid:/home/me/data/camvid/", "camvid:camvid"),
    ("onnx:/srv/m.onnx", "onnx:m.onnx"),
    ("demo", "demo"),
    ("dla:direction=horizontal", "dla:direction=horizontal"),
])
def test_brief_spec_drops_the_folders_of_a_machine(spec, shown) -> None:
    assert brief_spec(spec) == shown

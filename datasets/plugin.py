"""The built-in dataset readers as a plugin: registered through the same entry-point group
("segtk") as any third-party reader, by the segtk distribution itself."""

from __future__ import annotations

from segtk.core import DatasetPlugin, Register, hookimpl
from segtk.datasets import formats
from segtk.datasets.readers import FOLDER_SYNTAX, load_camvid, load_edited, load_folder


@hookimpl
def register_datasets(register: Register) -> None:
    register(
        DatasetPlugin(
            "folder",
            load_folder,
            f"{FOLDER_SYNTAX} (images/, labels/, classes.txt)",
            "--data folder:my_data",
            "paired image/label files by name",
        )
    )
    register(
        DatasetPlugin(
            "edited",
            load_edited,
            "edited:DIR (written by `segtk edit`)",
            "--data edited:runs/edit-fog",
            "images/, labels/, classes.txt and manifest.jsonl from `segtk edit`",
        )
    )
    register(
        DatasetPlugin(
            "camvid",
            load_camvid,
            "camvid:PATH [--split train|val|test]",
            "--data camvid:../shared/data/camvid",
            "CamVid, SegNet layout, 11 classes",
        )
    )
    register(
        DatasetPlugin(
            "cityscapes",
            formats.load_cityscapes,
            "cityscapes:PATH [--split train|val|test]",
            "--data cityscapes:../shared/data/cityscapes",
            "Cityscapes leftImg8bit/ + gtFine/, labelIds mapped to the 19 trainIds",
        )
    )
    register(
        DatasetPlugin(
            "voc",
            formats.load_voc,
            "voc:PATH [--split train|val]",
            "--data voc:../shared/data/voc",
            "Pascal VOC 2012, 21 classes: JPEGImages/ + SegmentationClass/, or images/ + targets/",
        )
    )
    register(
        DatasetPlugin(
            "ade20k",
            formats.load_ade20k,
            "ade20k:PATH [--split training|validation]",
            "--data ade20k:../shared/data/ade20k",
            "ADE20K SceneParsing (ADEChallengeData2016), 150 classes",
        )
    )

"""DLA on the real ESPNet CamVid model and real CamVid val images (../shared)."""

from __future__ import annotations

from segtk.core import load_dataset, load_segmenter
from segtk.jobs.attack import attack_dataset
from segtk.storage.runs import RunDir
from segtk.testing import shared
from segtk_dla import DLA

# The images DESIGN.md's anchor uses: clean 69.9 -> DLA@50 35.0 mean per-image mIoU (seed 0).
ANCHOR_IMAGES = ["0016E5_07959", "0016E5_07999", "0016E5_08039", "0016E5_08079", "0016E5_08119"]


def test_dla_halves_espnet_camvid_miou_in_50_queries(tmp_path) -> None:
    weights = shared("models/espnet_camvid.safetensors")
    model = load_segmenter(f"espnet:camvid={weights}")
    data = load_dataset(f"camvid:{shared('data/camvid')}").subset(names=ANCHOR_IMAGES)
    run = RunDir(tmp_path / "run", {"test": "real"}, resume=False, kind="attack")
    summary = attack_dataset(DLA(budget=50, eps=8, seed=0), model, data, run, batch_size=5,
                             save_images=False)
    t = summary.table
    assert t["images"] == 5 and t["mean_queries"] == 50 and t["max_linf"] <= 8
    drop = 1 - t["adv_image_miou"] / t["clean_image_miou"]
    print(f"clean {100 * t['clean_image_miou']:.1f} -> DLA@50 {100 * t['adv_image_miou']:.1f} "
          f"(drop {100 * drop:.0f}%)")
    assert 0.68 < t["clean_image_miou"] < 0.72  # the anchor's clean 69.9
    assert drop >= 0.40

"""MMSegmentation adapter.

Library-free parts (spec, checkpoint dicts, Resize rule, input packing) always run. With full
mmcv (compiled ops) + mmseg installed, FCN-R18 and SegFormer-B0 are built from the configs
shipped in the mmseg package (random init, 3 classes, small test Resize), saved with meta,
loaded through `--model mmseg:...` and compared with `mmseg.apis.init_model` +
`inference_model` on the same images.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from segtk.cli import cli
from segtk.core import ModelError, Segmenter, load_segmenter, missing_modules
from segtk.testing import SegmenterSuite, requires_stack
from segtk_mmseg.segmenter import (
    MMSegSegmenter,
    classes_from_checkpoint,
    find_resize,
    pack_inputs,
    parse,
    resized_shape,
    state_dict_from_checkpoint,
)


@functools.lru_cache(maxsize=4)
def loaded(spec: str) -> Segmenter:
    """One loaded model per spec for the contract suite's tests (loading is the slow part)."""
    return load_segmenter(spec)


MM_MISSING = missing_modules(("mmengine", "mmseg", "mmcv", "mmcv._ext"))
needs_mm = requires_stack(("mmengine", "mmseg", "mmcv", "mmcv._ext"), "SEGTK_REQUIRE_MMSEG")
CLASSES = ("sky", "road", "car")


def test_parse_spec() -> None:
    spec = parse("a/fcn.py,b/fcn.pth,classes=x;y,opts=model.decode_head.num_classes=2;"
                 "model.test_cfg.mode='slide';model.align_corners=True,trust")
    assert spec.config == Path("a/fcn.py") and spec.checkpoint == Path("b/fcn.pth")
    assert spec.classes == ["x", "y"] and spec.trust
    assert spec.options == {"model.decode_head.num_classes": 2, "model.test_cfg.mode": "slide",
                            "model.align_corners": True}
    for bad, match in [("a.py", "config file and a checkpoint"),
                       ("a.py,classes=x", "config file and a checkpoint"),
                       ("a.py,b.pth,colour=red", "unknown mmseg option"),
                       ("a.py,b.pth,opts=model", "KEY=VALUE")]:
        with pytest.raises(ModelError, match=match):
            parse(bad)


def test_classes_and_state_from_checkpoint_dicts() -> None:
    state = {"module.backbone.w": torch.zeros(1), "decode_head.b": torch.ones(1)}
    v1 = {"state_dict": state, "meta": {"dataset_meta": {"classes": CLASSES, "palette": []}}}
    v0 = {"state_dict": state, "meta": {"CLASSES": ["a", "b"], "PALETTE": []}}
    assert classes_from_checkpoint(v1) == list(CLASSES)
    assert classes_from_checkpoint(v0) == ["a", "b"]
    assert classes_from_checkpoint({"state_dict": state}) is None
    assert classes_from_checkpoint({"meta": {"dataset_meta": {}}}) is None
    assert set(state_dict_from_checkpoint(v1)) == {"backbone.w", "decode_head.b"}
    assert set(state_dict_from_checkpoint(state)) == {"backbone.w", "decode_head.b"}
    with pytest.raises(ModelError, match="no state_dict"):
        state_dict_from_checkpoint({"state_dict": {"x": "not a tensor"}})


def test_resize_rule_matches_mmcv() -> None:
    pipeline: list[dict[str, Any]] = [{"type": "LoadImageFromFile"}, {"type": "Resize", "scale": (2048, 512), "keep_ratio": True},
                {"type": "LoadAnnotations"}, {"type": "PackSegInputs"}]
    resize = find_resize(pipeline)
    assert resize == {"type": "Resize", "scale": (2048, 512), "keep_ratio": True}
    assert find_resize([{"type": "LoadImageFromFile"}]) is None
    assert resized_shape(480, 640, resize) == (512, 683)  # short edge to 512
    assert resized_shape(100, 1000, resize) == (205, 2048)  # long edge capped at 2048
    assert resized_shape(480, 640, {"scale": (320, 240), "keep_ratio": False}) == (240, 320)
    assert resized_shape(480, 640, {"scale_factor": 0.5}) == (240, 320)
    assert resized_shape(480, 640, None) == (480, 640)
    if importlib.util.find_spec("mmcv") is not None:
        import mmcv

        for h, w in [(480, 640), (37, 51), (1024, 2048)]:
            new_w, new_h = mmcv.rescale_size((w, h), (2048, 512))
            assert resized_shape(h, w, resize) == (new_h, new_w)


def test_pack_inputs_is_bgr_0_255_float() -> None:
    x = torch.rand(2, 3, 6, 10)
    inputs, metas = pack_inputs(x, None)
    assert len(inputs) == 2 and torch.equal(inputs[1], x[1].flip(0) * 255)
    assert metas[0]["ori_shape"] == (6, 10) == metas[0]["img_shape"]
    inputs, metas = pack_inputs(x, {"scale": (20, 12), "keep_ratio": True})
    assert inputs[0].shape == (3, 12, 20) and metas[0]["img_shape"] == (12, 20)
    assert metas[0]["scale_factor"] == (2.0, 2.0)


def test_listed_with_its_status() -> None:
    rows = json.loads(CliRunner().invoke(cli, ["plugins", "--json"]).output)
    row = next(r for r in rows if r["name"] == "mmseg")
    if MM_MISSING:
        assert row["status"] == "missing dependency" and row["missing"] == ", ".join(MM_MISSING)
        assert "scripts/install-mmseg.sh" in row["install"]
    else:
        assert row["status"] == "ok"


# --- with the library ----------------------------------------------------------------------------


def mim_config(relative: str) -> Path:
    import mmseg

    return Path(mmseg.__file__).parent / ".mim" / "configs" / relative


def write_model(tmp_path: Path, base: str, extra: str, scale: tuple[int, int], meta: bool = True):
    """A derived config (3 classes, small test Resize) and a random-init checkpoint with meta."""
    from mmseg.apis import init_model

    config = tmp_path / f"{Path(base).stem}_tiny.py"
    config.write_text(
        f"_base_ = {str(mim_config(base))!r}\n"
        f"{extra}\n"
        "test_pipeline = [dict(type='LoadImageFromFile'),\n"
        f"                 dict(type='Resize', scale={scale!r}, keep_ratio=True),\n"
        "                 dict(type='LoadAnnotations'), dict(type='PackSegInputs')]\n"
        "test_dataloader = dict(dataset=dict(pipeline=test_pipeline))\n")
    torch.manual_seed(0)
    model = init_model(str(config), None, device="cpu")
    with torch.no_grad():  # a decode head with some contrast, so labels are not near-ties
        w = model.decode_head.conv_seg.weight.normal_(0, 1.0)
        w -= w.mean(dim=1, keepdim=True)  # features are >= 0: zero-sum weights vary per pixel
    checkpoint = tmp_path / f"{Path(base).stem}.pth"
    payload = {"state_dict": model.state_dict()}
    if meta:
        payload["meta"] = {"dataset_meta": {"classes": CLASSES, "palette": [[0, 0, 0]] * 3}}
    torch.save(payload, checkpoint)
    return config, checkpoint


MODELS = {
    "fcn": ("fcn/fcn_r18-d8_4xb2-80k_cityscapes-512x1024.py",
            "model = dict(decode_head=dict(num_classes=3), auxiliary_head=dict(num_classes=3))"),
    "segformer": ("segformer/segformer_mit-b0_8xb2-160k_ade20k-512x512.py",
                  "model = dict(decode_head=dict(num_classes=3))"),
}


@needs_mm
@pytest.mark.parametrize("kind", ["fcn", "segformer"])
def test_equals_mmseg_inference_model(kind, tmp_path) -> None:
    from mmseg.apis import inference_model, init_model

    from segtk.core import load_segmenter
    base, extra = MODELS[kind]
    config, checkpoint = write_model(tmp_path, base, extra, scale=(96, 64))
    model = load_segmenter(f"mmseg:{config},{checkpoint}")
    assert isinstance(model, MMSegSegmenter)
    assert model.classes == list(CLASSES)
    assert model.resize is not None and model.resize["scale"] == (96, 64)
    g = np.random.default_rng(0)
    u8 = g.integers(0, 256, (3, 64, 96, 3), dtype=np.uint8)  # RGB, at the Resize scale: no resize
    x = torch.from_numpy(u8).permute(0, 3, 1, 2).float() / 255
    labels, logits = model.predict(x), model.logits(x)
    assert labels.shape == (3, 64, 96) and logits.shape == (3, 3, 64, 96)
    assert torch.equal(logits.argmax(1), labels)
    reference = init_model(str(config), str(checkpoint), device="cpu")
    assert list(reference.dataset_meta["classes"]) == model.classes
    for i in range(3):
        result = inference_model(reference, np.ascontiguousarray(u8[i][..., ::-1]))  # mmseg: BGR
        assert torch.equal(result.pred_sem_seg.data[0], labels[i]), f"image {i} differs"
        assert torch.allclose(result.seg_logits.data, logits[i], atol=1e-4)
    assert torch.equal(torch.cat([model.predict(x[i:i + 1]) for i in range(3)]), labels)
    assert len(labels.unique()) >= 2  # not a constant map
    # Another size goes through the test Resize (float here, uint8 cv2 in mmseg) and back.
    u8 = g.integers(0, 256, (2, 40, 50, 3), dtype=np.uint8)
    ours = model.predict(torch.from_numpy(u8).permute(0, 3, 1, 2).float() / 255)
    assert ours.shape == (2, 40, 50)
    for i in range(2):
        theirs = inference_model(reference, np.ascontiguousarray(u8[i][..., ::-1])).pred_sem_seg.data[0]
        assert float((theirs == ours[i]).float().mean()) > 0.95


@needs_mm
def test_float_resize_matches_mmcv_imresize() -> None:
    import mmcv

    img = np.random.default_rng(1).random((40, 50, 3)).astype(np.float32)
    resize = {"scale": (96, 64), "keep_ratio": True}
    inputs, metas = pack_inputs(torch.from_numpy(img).permute(2, 0, 1)[None], resize)
    h, w = metas[0]["img_shape"]
    theirs = mmcv.imresize(np.ascontiguousarray(img[..., ::-1]) * 255, (w, h), interpolation="bilinear")
    assert np.abs(inputs[0].permute(1, 2, 0).numpy() - theirs).max() < 1e-2


@needs_mm
def test_classes_override_fallback_and_errors(tmp_path) -> None:
    from segtk.core import load_segmenter
    base, extra = MODELS["fcn"]
    config, checkpoint = write_model(tmp_path, base, extra, scale=(32, 32), meta=False)
    with pytest.raises(ModelError, match="predicts 3 classes but 19 are named"):
        load_segmenter(f"mmseg:{config},{checkpoint}")  # cityscapes classes from the config
    model = load_segmenter(f"mmseg:{config},{checkpoint},classes=a;b;c")
    assert model.classes == ["a", "b", "c"]
    other = tmp_path / "other.pth"
    torch.save({"state_dict": {"decode_head.conv_seg.weight": torch.zeros(5, 512, 1, 1)}}, other)
    with pytest.raises(ModelError, match="does not fit"):
        load_segmenter(f"mmseg:{config},{other},classes=a;b;c")
    with pytest.raises(ModelError, match="checkpoint not found"):
        load_segmenter(f"mmseg:{config},{tmp_path / 'missing.pth'}")
    (tmp_path / "junk.pth").write_bytes(b"junk")
    with pytest.raises(ModelError, match="cannot load checkpoint"):
        load_segmenter(f"mmseg:{config},{tmp_path / 'junk.pth'}")


@pytest.fixture(scope="module")
def fcn_spec(tmp_path_factory: pytest.TempPathFactory) -> str:
    base, extra = MODELS["fcn"]
    config, checkpoint = write_model(tmp_path_factory.mktemp("mmseg"), base, extra, scale=(96, 64))
    return f"mmseg:{config},{checkpoint}"


@needs_mm
class TestMMSegContract(SegmenterSuite):
    """The segmenter contract (segtk.testing), on a random-init FCN through mmseg's config."""

    @pytest.fixture(autouse=True)
    def _spec(self, fcn_spec: str) -> None:
        self.spec = fcn_spec

    def make(self) -> Segmenter:
        return loaded(self.spec)

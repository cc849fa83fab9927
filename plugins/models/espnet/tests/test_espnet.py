"""ESPNet plugin: architecture vs the published key lists, accuracy on real data, loading, conversion."""

from __future__ import annotations

import functools
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from segtk.core import (
    ConfusionAccumulator,
    ModelError,
    Segmenter,
    load_dataset,
    load_segmenter,
    read_image,
    read_label,
    registry,
    to_tensor,
)
from segtk.testing import SegmenterSuite, shared
from segtk_espnet import ESPNetSegmenter, build_network, convert, load
from segtk_espnet.network import ESPNet, infer_config


@functools.lru_cache(maxsize=4)
def loaded(spec: str) -> Segmenter:
    """One loaded model per spec for the contract suite's tests (loading is the slow part)."""
    return load_segmenter(spec)


CITY_FRAME = "frankfurt_000000_000294"


def weights(variant: str) -> Path:
    return shared(f"models/espnet_{variant}.safetensors")


@pytest.fixture(scope="module")
def camvid() -> ESPNetSegmenter:
    model = load_segmenter(f"espnet:camvid={weights('camvid')}")
    assert isinstance(model, ESPNetSegmenter)
    return model


@pytest.fixture(scope="module")
def camvid_images() -> tuple[torch.Tensor, torch.Tensor]:
    data = load_dataset("camvid:" + str(shared("data/camvid")), limit=4)
    items = list(data)
    labels = torch.from_numpy(np.stack([it.label for it in items]))
    return to_tensor([it.image for it in items]), labels


# --- architecture -------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["camvid", "cityscapes"])
def test_state_dict_equals_published_key_list(variant: str) -> None:
    state = load_file(str(weights(variant)))
    config = infer_config(state)
    assert (config.p, config.q) == (2, 8)
    assert config.l1_concat_pooled == (variant == "camvid")  # 19-ch vs 16-ch level-1 concat
    net = config.build()
    net.load_state_dict(state, strict=True)
    listed = shared(f"models/espnet_{variant}.keys.txt").read_text().splitlines()
    ours = [f"{k} {tuple(v.shape)}" for k, v in net.state_dict().items()]
    assert ours == listed


@pytest.mark.parametrize("p,q,classes,pooled", [(2, 8, 12, True), (5, 3, 20, False), (1, 1, 5, True)])
def test_network_shapes_and_config_round_trip(p: int, q: int, classes: int, pooled: bool) -> None:
    net = ESPNet(classes, p=p, q=q, l1_concat_pooled=pooled).eval()
    config = infer_config(net.state_dict())
    assert (config.classes, config.p, config.q, config.l1_concat_pooled) == (classes, p, q, pooled)
    assert not any("num_batches_tracked" in k for k in net.state_dict())
    with torch.inference_mode():
        out = net(torch.rand(2, 3, 32, 48))
    assert out.shape == (2, classes, 32, 48)
    with pytest.raises(ValueError, match="divisible by 8"):
        net(torch.rand(1, 3, 30, 48))
    with pytest.raises(ValueError, match="at least 5"):
        ESPNet(4)


# --- accuracy on real data ----------------------------------------------------------------------


def test_camvid_val_miou(camvid: ESPNetSegmenter) -> None:
    """All 101 CamVid val images; an independent implementation measured 70.10% mIoU."""
    data = load_dataset("camvid:" + str(shared("data/camvid")))
    assert len(data) == 101
    acc = ConfusionAccumulator(11, ignore_index=255)
    start = time.perf_counter()
    for i in range(0, len(data), 8):
        items = [data[j] for j in range(i, min(i + 8, len(data)))]
        images = to_tensor([it.image for it in items])
        labels = torch.from_numpy(np.stack([it.label for it in items]))
        pred = camvid.predict(images)
        assert pred.shape == labels.shape and pred.dtype == torch.int64
        acc.add(pred, labels)
    elapsed = time.perf_counter() - start
    print(f"CamVid val mIoU {acc.miou:.4f} pixel acc {acc.pacc:.4f} in {elapsed:.1f}s")
    assert acc.miou == pytest.approx(0.701, abs=0.005)
    assert acc.pacc > 0.9


def test_cityscapes_frame(camvid: ESPNetSegmenter) -> None:
    """The one labelled Cityscapes frame (256x128, run at 1024x512): measured 38.0% mIoU."""
    model = load_segmenter(f"espnet:cityscapes={weights('cityscapes')}")
    root = shared("data/cityscapes")
    image = to_tensor([read_image(root / "leftImg8bit" / f"{CITY_FRAME}_leftImg8bit.png")])
    label = torch.from_numpy(read_label(root / "gtFine" / f"{CITY_FRAME}_gtFine_labelTrainIds.png"))
    logits = model.logits(image)
    assert logits.shape == (1, 20, 128, 256)
    pred = model.predict(image)
    assert torch.equal(pred, logits.argmax(1))
    acc = ConfusionAccumulator(19)
    acc.add(pred, label[None])
    print(f"Cityscapes frame mIoU {acc.miou:.4f} pixel acc {acc.pacc:.4f}")
    assert 0.33 <= acc.miou <= 0.45
    assert acc.pacc > 0.8
    assert model.classes[0] == "road" and model.classes[-1] == "bicycle" and model.num_classes == 19


def test_batched_equals_one_at_a_time(camvid: ESPNetSegmenter, camvid_images) -> None:
    images, _ = camvid_images
    batched = camvid.predict(images)
    single = torch.cat([camvid.predict(images[i : i + 1]) for i in range(len(images))])
    # oneDNN may pick other conv kernels per batch size: allow float-noise argmax flips
    differing = (batched != single).float().mean().item()
    assert differing <= 1e-4, f"{differing:.2e} of the pixels differ"
    logits = camvid.logits(images)
    assert logits.shape == (len(images), 12, 360, 480)
    assert (camvid.predict(images) == batched).all()  # deterministic


def test_any_size_and_empty_batch(camvid: ESPNetSegmenter, camvid_images) -> None:
    images, _ = camvid_images
    crop = images[:2, :, 5:42, 7:60]  # 37x53: padded to a multiple of 8 inside, cropped back
    assert camvid.predict(crop).shape == (2, 37, 53)
    assert camvid.logits(crop).shape == (2, 12, 37, 53)
    assert camvid.predict(images[:1, :, :1, :1]).shape == (1, 1, 1)
    assert camvid.predict(images[:0]).shape == (0, 360, 480)
    # the 12th "void" output stays in the argmax
    assert camvid.num_classes == 11 and camvid.logits(crop).shape[1] == 12


def test_differentiable_logits_are_the_logits_with_a_graph(camvid: ESPNetSegmenter,
                                                            camvid_images) -> None:
    """What white-box attacks differentiate: the eval-mode logits, with a graph to the image."""
    images = camvid_images[0][:2, :, 100:164, 200:280].clone().requires_grad_(True)
    scores = camvid.differentiable_logits(images)
    assert scores.requires_grad and scores.shape == (2, 12, 64, 80)
    assert torch.allclose(scores.detach(), camvid.logits(images.detach()), rtol=1e-4, atol=1e-4)
    (grad,) = torch.autograd.grad(scores[:, 0].sum(), images)
    assert bool(torch.isfinite(grad).all()) and float(grad.abs().sum()) > 0
    assert camvid.differentiable_logits(images[:0]).shape == (0, 12, 64, 80)


# --- loading ------------------------------------------------------------------------------------


def test_plugin_is_registered() -> None:
    plugin = registry.segmenter_plugin("espnet")
    assert plugin.convert is convert
    assert "camvid=" in plugin.syntax and "cityscapes=" in plugin.syntax


def test_missing_file_names_it(tmp_path: Path) -> None:
    path = tmp_path / "nope.safetensors"
    with pytest.raises(ModelError, match="nope.safetensors") as err:
        load_segmenter(f"espnet:camvid={path}")
    assert err.value.hint


@pytest.mark.parametrize("arg", ["ade20k=x.safetensors", "x.safetensors", "camvid=", ""])
def test_unknown_variant_gives_syntax(arg: str) -> None:
    with pytest.raises(ModelError) as err:
        load(arg)
    assert "espnet:camvid=PATH" in str(err.value)


def test_variant_mismatch() -> None:
    with pytest.raises(ModelError, match="20 outputs") as err:
        load(f"camvid={weights('cityscapes')}")
    assert "espnet:cityscapes=" in str(err.value)


def test_not_safetensors(tmp_path: Path) -> None:
    path = tmp_path / "model.pth"
    path.write_bytes(b"not a safetensors file")
    with pytest.raises(ModelError, match="model.pth") as err:
        load(f"camvid={path}")
    assert "segtk models convert espnet" in str(err.value)


def test_mismatched_keys_are_listed() -> None:
    state = dict(load_file(str(weights("camvid"))))
    state["encoder.level2.0.c1.conv.wrong"] = state.pop("encoder.level2.0.c1.conv.weight")
    state["decoder.extra"] = torch.zeros(1)
    with pytest.raises(ModelError) as err:
        build_network(state, "some.safetensors")
    msg = str(err.value)
    assert "some.safetensors" in msg
    assert "missing keys: encoder.level2.0.c1.conv.weight" in msg
    assert "encoder.level2.0.c1.conv.wrong" in msg and "decoder.extra" in msg
    with pytest.raises(ModelError, match="not an ESPNet checkpoint"):
        build_network({"fc.weight": torch.zeros(2, 2)}, "other.safetensors")


# --- conversion ---------------------------------------------------------------------------------


def test_convert_pth_round_trip(tmp_path: Path, camvid: ESPNetSegmenter, camvid_images) -> None:
    state = load_file(str(weights("camvid")))
    raw, nested = tmp_path / "raw.pth", tmp_path / "nested.pth"
    torch.save(state, raw)
    torch.save({"epoch": 300, "state_dict": {f"module.{k}": v for k, v in state.items()}}, nested)
    torch.save({"model": dict(state)}, tmp_path / "model.pth")
    images = camvid_images[0][:2, :, :120, :160]
    expected = camvid.logits(images)
    for src in (raw, nested, tmp_path / "model.pth"):
        out = tmp_path / f"{src.stem}.safetensors"
        convert(str(src), str(out))
        converted = load_file(str(out))
        assert converted.keys() == state.keys()
        assert all(torch.equal(converted[k], state[k]) for k in state)
        model = load_segmenter(f"espnet:camvid={out}")
        assert torch.equal(model.logits(images), expected)
        assert torch.equal(model.predict(images), expected.argmax(1))
    assert not list(tmp_path.glob("*.tmp")) and not list(tmp_path.glob(".*"))


def test_convert_drops_batchnorm_counters(tmp_path: Path) -> None:
    state = dict(load_file(str(weights("cityscapes"))))
    state["encoder.b1.bn.num_batches_tracked"] = torch.tensor(7)
    src, out = tmp_path / "city.pth", tmp_path / "city.safetensors"
    torch.save(state, src)
    convert(str(src), str(out))
    assert "encoder.b1.bn.num_batches_tracked" not in load_file(str(out))
    assert load(f"cityscapes={out}").classes[-1] == "bicycle"


def test_convert_wrong_key_fails_clearly(tmp_path: Path) -> None:
    state = dict(load_file(str(weights("camvid"))))
    state["encoder.level3.7.d16.conv.kernel"] = state.pop("encoder.level3.7.d16.conv.weight")
    src, out = tmp_path / "bad.pth", tmp_path / "bad.safetensors"
    torch.save(state, src)
    with pytest.raises(ModelError) as err:
        convert(str(src), str(out))
    msg = str(err.value)
    assert "bad.pth" in msg
    assert "missing keys: encoder.level3.7.d16.conv.weight" in msg
    assert "unexpected keys: encoder.level3.7.d16.conv.kernel" in msg
    assert not out.exists()


def test_convert_unreadable_inputs(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="absent.pth"):
        convert(str(tmp_path / "absent.pth"), str(tmp_path / "o.safetensors"))
    junk = tmp_path / "junk.pth"
    junk.write_bytes(b"garbage")
    with pytest.raises(ModelError, match="junk.pth"):
        convert(str(junk), str(tmp_path / "o.safetensors"))
    listy = tmp_path / "list.pth"
    torch.save([torch.zeros(1)], listy)
    with pytest.raises(ModelError, match="no state dict"):
        convert(str(listy), str(tmp_path / "o.safetensors"))
    assert not (tmp_path / "o.safetensors").exists()


def test_cli_models_convert(tmp_path: Path) -> None:
    """`segtk models convert espnet IN.pth OUT.safetensors` end to end, and its error path."""
    from click.testing import CliRunner

    from segtk.cli import cli

    state = load_file(str(weights("camvid")))
    torch.save({"state_dict": {f"module.{k}": v for k, v in state.items()}}, tmp_path / "w.pth")
    out = tmp_path / "w.safetensors"
    result = CliRunner().invoke(cli, ["models", "convert", "espnet", str(tmp_path / "w.pth"), str(out)])
    assert result.exit_code == 0, result.output
    converted = load_file(str(out))
    assert converted.keys() == state.keys()
    assert all(torch.equal(converted[k], state[k]) for k in state)
    bad = CliRunner().invoke(cli, ["models", "convert", "espnet", str(tmp_path / "nope.pth"), str(out)])
    assert bad.exit_code == 1 and "nope.pth" in bad.output


@pytest.mark.shared
class TestESPNetContract(SegmenterSuite):
    """The segmenter contract (segtk.testing), on the CamVid weights in ../shared."""

    def make(self) -> Segmenter:
        return loaded(f"espnet:camvid={weights('camvid')}")

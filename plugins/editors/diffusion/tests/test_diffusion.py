"""Gen4Seg diffusion backend: the mechanics on a tiny random SD stack built and saved offline.

The stack (UNet, VAE, CLIP text encoder, tokenizer, DDIM scheduler, ControlNet, inpainting UNet)
is written with save_pretrained to the folder layout that `--sd/--controlnet/--inpaint` expect
and loaded back through `get_backend(paths)`, the real loading path. Random weights make the
images meaningless; these tests check injection, energy, blending, alignment and determinism.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from segtk.core import EditedSample, ModelError, PluginError, Sample, registry, reset_plugin_manager
from segtk.editkit import AttributeEditor
from segtk.testing import EditBackendSuite, EditorSuite, toy_sample
from segtk_diffusion import INSTALL, REQUIRES, Gen4SegBackend, ReconEditor, get_backend
from segtk_diffusion.sampler import Trace

SIZE = 64


class Tint(AttributeEditor):
    """An editor of the editing kit; `--backend diffusion` finds this plugin's backend."""

    name = attribute = "tint"
    values = ("red", "blue")
    prompt_templates = {"*": "a photo of {a_value} {cls}"}
    requires = ()

    def classical(self, sample, value, rng):
        raise AssertionError("the diffusion backend edits here")
WORDS = ["a", "photo", "of", "red", "blue", "car", "road", "street", "empty"]


def _tokenizer(folder: Path):
    from transformers import CLIPTokenizer

    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    vocab = ["<|startoftext|>", "<|endoftext|>", *letters, *(c + "</w>" for c in letters)]
    merges = ["#version: 0.2"]
    for w in WORDS:  # merge each test word left to right into one token
        cur = w[0]
        for j, ch in enumerate(w[1:], 1):
            nxt = ch + ("</w>" if j == len(w) - 1 else "")
            merges.append(f"{cur} {nxt}")
            cur = cur + nxt
            if cur not in vocab:
                vocab.append(cur)
    raw = folder / "raw"
    raw.mkdir(parents=True)
    (raw / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(vocab)}))
    (raw / "merges.txt").write_text("\n".join(merges) + "\n")
    tok = CLIPTokenizer(str(raw / "vocab.json"), str(raw / "merges.txt"), model_max_length=77)
    return tok, len(vocab)


def _unet(in_channels: int):
    from diffusers import UNet2DConditionModel

    return UNet2DConditionModel(
        sample_size=8, in_channels=in_channels, out_channels=4, layers_per_block=1,
        block_out_channels=(32, 64), down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=32,
        attention_head_dim=8, norm_num_groups=8,
    )


def _save_sd(folder: Path, unet, tok, vocab_size: int, seed: int) -> None:
    import torch
    from diffusers import AutoencoderKL, DDIMScheduler
    from transformers import CLIPTextConfig, CLIPTextModel

    torch.manual_seed(seed)
    vae = AutoencoderKL(
        in_channels=3, out_channels=3, latent_channels=4, layers_per_block=1,
        block_out_channels=(16, 16, 16, 16), norm_num_groups=8,
        down_block_types=("DownEncoderBlock2D",) * 4, up_block_types=("UpDecoderBlock2D",) * 4,
    )
    text = CLIPTextModel(CLIPTextConfig(
        vocab_size=vocab_size, hidden_size=32, intermediate_size=37, num_hidden_layers=2,
        num_attention_heads=4, max_position_embeddings=77, bos_token_id=0, eos_token_id=1,
        pad_token_id=1,
    ))
    sched = DDIMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                          clip_sample=False, set_alpha_to_one=False, steps_offset=1)
    unet.save_pretrained(folder / "unet")
    vae.save_pretrained(folder / "vae")  # type: ignore[attr-defined]  # diffusers: mypy misses the mixin's method
    text.save_pretrained(folder / "text_encoder")
    tok.save_pretrained(folder / "tokenizer")
    sched.save_pretrained(folder / "scheduler")  # type: ignore[attr-defined]  # diffusers: mypy misses the mixin's method


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    pytest.importorskip("diffusers")
    import torch
    from diffusers import ControlNetModel

    root = tmp_path_factory.mktemp("tiny_sd")
    tok, n_vocab = _tokenizer(root / "tok")
    torch.manual_seed(0)
    unet = _unet(4)
    _save_sd(root / "sd", unet, tok, n_vocab, 1)
    ControlNetModel.from_unet(unet).save_pretrained(root / "controlnet")
    torch.manual_seed(2)
    _save_sd(root / "inpaint", _unet(9), tok, n_vocab, 3)
    return {"sd": str(root / "sd"), "controlnet": str(root / "controlnet"),
            "inpaint": str(root / "inpaint")}


def _options(stack, **kw):
    return {**stack, "steps": 3, "resolution": SIZE, "device": "cpu", **kw}


def last_trace(backend: Gen4SegBackend) -> Trace:
    """The trace of the backend's last appearance run (kept: `backend.record` is set)."""
    assert backend.last_trace is not None
    return backend.last_trace


def blend_mask(trace: Trace) -> torch.Tensor:
    assert trace.mask is not None
    return trace.mask


def _sample(h: int = SIZE, w: int = SIZE) -> Sample:
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[:h, :w]
    image = np.stack([xx * 255 // w, yy * 255 // h, (xx + yy) % 256], -1).astype(np.uint8)
    image = np.clip(image.astype(int) + rng.integers(-20, 20, image.shape), 0, 255)
    mask = (yy > h // 4) & (yy < 3 * h // 4) & (xx > w // 4) & (xx < w // 2)
    label = np.where(mask, 1, 0).astype(np.int64)
    label[0, 0] = 255
    return Sample("toy", image.astype(np.uint8), label, mask, ["road", "car"], "car",
                  "a photo of a car")


def test_blending_keeps_source_latents_outside_the_mask(stack) -> None:
    backend = get_backend(_options(stack, energy_threshold=0.0, energy_iters=1))
    backend.record = True
    sample = _sample()
    out = backend.appearance(sample, "red", "a photo of a car", "a photo of a red car",
                             np.random.default_rng(0))
    trace = last_trace(backend)
    m = blend_mask(trace)
    assert 0 < float(m.mean()) < 1  # a local edit at latent resolution
    assert len(trace.edit) == 3
    for edit, src in zip(trace.edit, trace.source):
        assert bool(((edit - src) * (1 - m)).abs().max() == 0)  # Eq. 7, exactly
    assert any(bool(((e - s) * m).abs().max() > 0) for e, s in zip(trace.edit, trace.source))
    assert out.image.shape == sample.image.shape and out.image.dtype == np.uint8
    np.testing.assert_array_equal(out.label, sample.label)
    np.testing.assert_array_equal(out.mask, sample.mask)
    assert out.metadata["controlnet"] is True
    assert out.metadata["edit_token_rule"] == "value/class tokens"
    assert len(out.metadata["edit_tokens"]) == 2  # "red" and "car", one token each here
    json.dumps(out.metadata)  # run records must be able to store it


def test_blend_off_leaves_the_latents_outside_the_mask_to_the_edit(stack) -> None:
    """Table VIII without "Blend": the final latent outside the mask is the editing branch's,
    not the source's, so the decoded image differs there from the blended edit's."""
    sample = _sample()
    traces, images, meta = [], [], []
    for blend in (True, False):
        backend = get_backend(_options(stack, energy=False, blend=blend))
        backend.record = True
        out = backend.appearance(sample, "red", "a photo of a car", "a photo of a red car",
                                 np.random.default_rng(0))
        traces.append(last_trace(backend))
        images.append(out.image)
        meta.append(out.metadata)
    m = blend_mask(traces[0])
    on, off = (((t.edit[-1] - t.source[-1]) * (1 - m)).abs().max() for t in traces)
    assert on == 0  # Eq. 7: outside the mask the last latent is the encoded source
    assert off > 0  # without it, the edit's own latent stays there
    assert all(bool(((e - s) * (1 - m)).abs().max() > 0)
               for e, s in zip(traces[1].edit, traces[1].source))
    assert (images[0][~sample.mask] != images[1][~sample.mask]).any()
    assert meta[0]["blend"] is True and meta[1]["blend"] is False


def test_energy_off_never_computes_the_energy(stack, monkeypatch) -> None:
    """Table VIII without "Loss": Eq. 5 is never evaluated (so no gradient step), and the edit
    equals the one with eta=0, the only way to switch it off before."""
    from segtk_diffusion import attention

    calls = []
    real = attention.mask_energy

    def counted(*a: Any, **k: Any) -> Any:
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(attention, "mask_energy", counted)
    guided: dict[str, Any] = dict(eta=5e3, energy_threshold=0.0, energy_iters=1, energy_until=1.0)
    outs, counts = {}, {}
    variants: list[tuple[str, dict[str, Any]]] = [("on", {}), ("off", {"energy": False}),
                                                  ("eta0", {"eta": 0.0})]
    for name, extra in variants:
        before = len(calls)
        outs[name] = get_backend(_options(stack, **{**guided, **extra})).appearance(
            _sample(), "red", "a photo of a car", "a photo of a red car", np.random.default_rng(0))
        counts[name] = len(calls) - before
    assert counts == {"on": 3, "off": 0, "eta0": 0}  # one evaluation per guided step when on
    np.testing.assert_array_equal(outs["off"].image, outs["eta0"].image)
    assert (outs["on"].image != outs["off"].image).any()  # the guidance does change the edit
    assert outs["on"].metadata["energy"] is True and len(outs["on"].metadata["energy_values"]) == 2
    assert outs["off"].metadata["energy"] is False and outs["off"].metadata["energy_values"] == []
    assert outs["off"].metadata["eta"] == 0.0


def test_energy_falls_after_a_guidance_step(stack) -> None:
    backend = get_backend(_options(stack, eta=5e3, energy_threshold=0.0, energy_iters=1,
                                   energy_until=1.0))
    backend.record = True
    backend.appearance(_sample(), "red", "a photo of a car", "a photo of a red car",
                       np.random.default_rng(0))
    steps = last_trace(backend).energy
    assert len(steps) == 3
    assert all(0 <= before <= 1 for before, _ in steps)
    assert all(after < before for before, after in steps), steps


def test_energy_guidance_stops_below_threshold_and_skips_image_level_edits(stack) -> None:
    backend = get_backend(_options(stack, energy_threshold=1.0))
    backend.record = True
    backend.appearance(_sample(), "red", "a photo of a car", "a photo of a red car", None)
    assert [round(b - a, 12) for b, a in last_trace(backend).energy] == [0.0]  # no update
    s = _sample()
    whole = Sample(s.name, s.image, s.label, np.ones_like(s.mask), s.classes, "", s.prompt)
    out = backend.appearance(whole, "snow", "a photo", "a photo of snow", None)
    assert last_trace(backend).energy == [] and out.metadata["energy_values"] == []
    assert out.metadata["energy"] is False and out.metadata["blend"] is False  # both no-ops


def test_same_seed_same_output_and_non_square_sizes(stack) -> None:
    backend = get_backend(_options(stack, energy_iters=2))
    s = _sample(40, 56)  # resized to 48x64 (multiples of 8) and back
    a = backend.appearance(s, "blue", "a photo of a car", "a photo of a blue car",
                           np.random.default_rng(3))
    b = backend.appearance(s, "blue", "a photo of a car", "a photo of a blue car",
                           np.random.default_rng(3))
    np.testing.assert_array_equal(a.image, b.image)
    assert a.image.shape == (40, 56, 3) and a.metadata["work_size"] == [48, 64]
    r1, r2 = backend.recon(s, np.random.default_rng(0)), backend.recon(s, np.random.default_rng(0))
    np.testing.assert_array_equal(r1.image, r2.image)
    assert r1.value == "recon" and r1.metadata["method"] == "recon"
    np.testing.assert_array_equal(r1.label, s.label)


def test_injection_layers_follow_pnp_on_an_sd_shaped_unet() -> None:
    pytest.importorskip("diffusers")
    from diffusers import UNet2DConditionModel

    from segtk_diffusion.attention import install

    unet = UNet2DConditionModel(  # SD's block layout, tiny widths
        sample_size=8, block_out_channels=(8, 8, 8, 8), layers_per_block=2,
        cross_attention_dim=8, attention_head_dim=4, norm_num_groups=4,
    )
    ctl = install(unet)
    short = sorted(n.replace(".transformer_blocks.0", "").replace(".processor", "")
                   for n in ctl.attn_layers)
    assert short == [f"up_blocks.{b}.attentions.{a}.attn1"  # PnP: decoder layers 4-11
                     for b, a in [(1, 1), (1, 2), (2, 0), (2, 1), (2, 2), (3, 0), (3, 1), (3, 2)]]
    assert ctl.feature_layer == "up_blocks.1.resnets.1"  # PnP's residual-block injection
    short = sorted(n.replace(".transformer_blocks.0", "").replace(".processor", "")
                   for n in ctl.energy_layers)
    assert short == ["mid_block.attentions.0.attn2", "up_blocks.1.attentions.0.attn2",
                     "up_blocks.1.attentions.1.attn2", "up_blocks.1.attentions.2.attn2"]


def test_injection_copies_source_features_and_attention(stack) -> None:
    import torch

    backend = get_backend(_options(stack))
    sd = backend._sd()
    unet, ctl = sd.unet, sd.controller
    seen = []
    block = unet.get_submodule(ctl.feature_layer)
    handle = block.conv2.register_forward_hook(lambda m, i, o: seen.append(o.clone()))
    z = torch.randn(2, 4, 8, 8, generator=torch.Generator().manual_seed(0))
    emb = torch.randn(2, 77, 32, generator=torch.Generator().manual_seed(1))
    try:
        with torch.no_grad():
            plain = unet(z, 500, encoder_hidden_states=emb).sample
            ctl.inject_feat = True
            feat = unet(z, 500, encoder_hidden_states=emb).sample
            ctl.inject_feat, ctl.inject_attn = False, True
            attn = unet(z, 500, encoder_hidden_states=emb).sample
    finally:
        ctl.reset()
        handle.remove()
    assert not torch.equal(seen[0][0], seen[0][1])
    assert torch.equal(seen[1][0], seen[1][1])  # Eq. 3: the edit row got the source's features
    for out in (feat, attn):
        assert torch.equal(out[0], plain[0])  # the source branch is never touched
        assert not torch.allclose(out[1], plain[1])  # the editing branch is


def _moved(sample: Sample, dx: int = 12) -> EditedSample:
    """A rigid shift of the object by dx pixels, pasted over the original (the caller's job)."""
    mask = np.roll(sample.mask, dx, axis=1)
    image = sample.image.copy()
    image[mask] = np.roll(sample.image, dx, axis=1)[mask]
    label = np.where(sample.mask, 0, sample.label)
    label[mask] = 1
    out = EditedSample(image, label, mask, "position-0.2", metadata={"dx": dx})
    if hasattr(out, "repaint"):  # the core's EditedSample may carry the uncovered area
        out.repaint = sample.mask & ~mask
    return out


def test_geometry_keeps_image_mask_and_label_aligned(stack) -> None:
    from segtk_diffusion.imaging import soft_inpaint_mask

    backend = get_backend(_options(stack, background_prompt="an empty road"))
    s = _sample()
    moved = _moved(s)
    out = backend.geometry(s, moved, np.random.default_rng(0))
    np.testing.assert_array_equal(out.label, moved.label)
    np.testing.assert_array_equal(out.mask, moved.mask)
    soft = soft_inpaint_mask(s.mask & ~moved.mask)
    outside = soft == 0
    assert outside.sum() > 0 and (~outside).sum() > 0
    np.testing.assert_array_equal(out.image[outside], moved.image[outside])  # exact composite
    assert (out.image[soft == 1] != moved.image[soft == 1]).any()  # the hole was repainted
    assert out.metadata["dx"] == 12 and out.metadata["inpaint"]["prompt"] == "an empty road"
    again = backend.geometry(s, moved, np.random.default_rng(0))
    np.testing.assert_array_equal(out.image, again.image)  # same seed, same output
    other = backend.geometry(s, moved, np.random.default_rng(1))
    assert (other.image != out.image).any()  # the seed drives the inpainting noise


def test_soft_mask_is_dilated_then_smoothed() -> None:
    from segtk_diffusion.imaging import soft_inpaint_mask

    region = np.zeros((15, 15), bool)
    region[7, 7] = True
    soft = soft_inpaint_mask(region)
    assert soft[6:9, 6:9].min() == 1.0  # the 5x5 dilation's core stays 1 after 3x3 averaging
    assert soft[5, 7] == pytest.approx(2 / 3) and soft[4, 7] == pytest.approx(1 / 3)  # the rim
    assert soft[3, 7] == 0 and soft[7, 11] == 0 and soft.max() == 1.0


def test_options_from_cli_strings() -> None:
    from segtk_diffusion.options import DiffusionOptions

    o = DiffusionOptions.from_dict({"steps": "20", "guidance": "5", "paste-background": "no",
                                    "sd": None})
    assert (o.steps, o.guidance, o.paste_background, o.sd) == (20, 5.0, False, None)
    assert DiffusionOptions.from_dict({"paste_background": "true"}).paste_background is True
    assert (o.blend, o.energy, o.allow_no_controlnet) == (True, True, False)  # the paper's method
    o = DiffusionOptions.from_dict({"blend": "false", "energy": "no", "allow-no-controlnet": "1"})
    assert (o.blend, o.energy, o.allow_no_controlnet) == (False, False, True)


@pytest.mark.parametrize("options,message", [
    # a typo would silently run the full method: segtk's one unknown-parameter error
    ({"blnd": "false"}, "unknown parameter 'blnd' for edit-backend 'diffusion' (did you mean "
                        "'blend'?)"),
    ({"fill": "auto"}, "unknown parameter 'fill' for edit-backend 'diffusion'"),
    ({"energy": "maybe"}, "cannot read energy='maybe'"),
    ({"blend": 0}, "blend must be true or false, got 0"),  # a Python value is not read as text
])
def test_unknown_or_unreadable_options_are_refused(options, message) -> None:
    from segtk.core import SegtkError
    from segtk_diffusion.options import DiffusionOptions

    with pytest.raises(SegtkError) as err:
        DiffusionOptions.from_dict(options)
    assert message in err.value.message and "\n" not in str(err.value)
    if "blnd" in options:
        hint = str(err.value.hint)
        assert hint.startswith("diffusion takes: sd=None") and "energy=True" in hint


def test_an_unknown_option_is_refused_through_an_editor(stack) -> None:
    from segtk.core import PluginError

    with pytest.raises(PluginError, match="unknown parameter 'energie' for edit-backend 'diffusion'"):
        Tint(backend="diffusion", energie="false", **_options(stack))


def test_missing_weights_name_the_option(stack, tmp_path) -> None:
    s = _sample()
    bare = {"allow_no_controlnet": True}  # these checks are about the other weights
    backend = get_backend({"steps": 2, "device": "cpu", **bare})
    with pytest.raises(ModelError, match=r"--sd PATH"):
        backend.appearance(s, "red", "a car", "a red car", None)
    with pytest.raises(ModelError, match=r"--inpaint PATH"):
        backend.geometry(s, _moved(s), None)
    with pytest.raises(ModelError, match=r"--sd .*lacks .*vae/"):
        (tmp_path / "half" / "unet").mkdir(parents=True)
        get_backend({"sd": str(tmp_path / "half"), **bare}).check("appearance")
    with pytest.raises(ModelError, match=r"--controlnet .*no such folder"):
        get_backend({**stack, "controlnet": str(tmp_path / "nope")}).check("appearance")
    with pytest.raises(ModelError, match=r"--sd org/absent.*Hugging Face cache"):
        get_backend({"sd": "org/absent", **bare}).check("appearance")
    with pytest.raises(ModelError, match=r"not 9: not an inpainting model"):
        get_backend({"inpaint": stack["sd"], **bare}).check("geometry")


def test_recon_editor_is_registered(monkeypatch) -> None:
    monkeypatch.delenv("SEGTK_LOAD_PLUGINS", raising=False)
    reset_plugin_manager()
    try:
        info = {(i.kind, i.name): i for i in registry.plugins()}
        recon = info[("editor", "recon")]
        assert recon.distribution == "segtk-diffusion" and recon.obj is ReconEditor
        assert (ReconEditor.attribute, ReconEditor.kind) == ("recon", "appearance")
        assert ReconEditor.requires == REQUIRES == ("diffusers", "transformers")
        backend = info[("edit-backend", "diffusion")]
        assert backend.distribution == "segtk-diffusion" and backend.obj is Gen4SegBackend
        assert Gen4SegBackend.reference == "recon" and Gen4SegBackend.requires == REQUIRES
        if "diffusers" in sys.modules or not recon.missing:
            assert registry.editor("recon") is ReconEditor
            assert registry.edit_backend("diffusion") is Gen4SegBackend
    finally:
        reset_plugin_manager()


def test_without_diffusers_recon_is_a_missing_dependency(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "diffusers", None)  # find_spec -> None, import fails
    monkeypatch.delenv("SEGTK_LOAD_PLUGINS", raising=False)
    reset_plugin_manager()
    try:
        recon = next(i for i in registry.plugins() if i.name == "recon")
        assert recon.status == "missing dependency" and recon.missing == ["diffusers"]
        assert recon.install == INSTALL
        with pytest.raises(PluginError, match="needs diffusers") as err:
            registry.editor("recon")
        assert "diffusers==" in str(err.value)
        with pytest.raises(PluginError, match="needs diffusers"):
            get_backend({"sd": "x"})
        with pytest.raises(PluginError, match="edit-backend plugin 'diffusion' needs diffusers"):
            Tint(backend="diffusion")
    finally:
        reset_plugin_manager()


def test_recon_editor_runs_through_the_backend(stack) -> None:
    t0 = time.perf_counter()
    editor = ReconEditor(options=_options(stack, steps=2))
    out = editor.edit(_sample(), "recon", np.random.default_rng(0))
    assert out.value == "recon" and out.image.shape == (SIZE, SIZE, 3)
    assert time.perf_counter() - t0 < 20


def test_an_editor_with_backend_diffusion_edits_through_this_plugin(stack) -> None:
    editor = Tint(backend="diffusion", **_options(stack, steps=2))
    assert isinstance(editor.engine, Gen4SegBackend) and editor.engine.options.steps == 2
    sample = _sample()
    out = editor.edit(sample, "blue", np.random.default_rng(0))
    assert out.prompt == "a photo of a blue car" and out.metadata["backend"] == "gen4seg"
    assert out.metadata["method"] == "mask-guided-diffusion"
    np.testing.assert_array_equal(out.label, sample.label)
    # the backend's image is kept whole: outside the mask it was blended in latent space
    # (Eq. 7), like the Recon reference, not replaced by the source pixels
    raw = editor.engine.appearance(sample, "blue", sample.prompt, out.prompt,
                                   np.random.default_rng(0))
    np.testing.assert_array_equal(out.image, raw.image)
    assert (out.image[~sample.mask] != sample.image[~sample.mask]).any()


def test_no_controlnet_is_refused_unless_allowed(stack) -> None:
    """Without a seg ControlNet the edit is not conditioned on the label map the benchmark
    reuses: refused, unless allow_no_controlnet says it is meant (an ablation)."""
    no_cn = {k: v for k, v in _options(stack).items() if k != "controlnet"}
    with pytest.raises(ModelError, match="the diffusion backend has no ControlNet") as err:
        get_backend(no_cn)
    assert "allow_no_controlnet=true" in str(err.value.hint)
    assert "controlnet=DIR" in str(err.value.hint)
    geometry_only = get_backend({**no_cn, "inpaint_controlnet": stack["controlnet"]})
    with pytest.raises(ModelError, match="appearance editing and recon .* has no ControlNet"):
        geometry_only.appearance(_sample(), "red", "a photo of a car", "a photo of a red car",
                                 None)
    out = get_backend({**no_cn, "allow_no_controlnet": True}).appearance(
        _sample(), "red", "a photo of a car", "a photo of a red car", None)
    assert out.metadata["controlnet"] is False


def _cli(*args: str):
    from click.testing import CliRunner

    from segtk.cli import cli

    return CliRunner().invoke(cli, list(args))


def test_edit_and_bench_edits_refuse_diffusion_without_controlnet(stack, tmp_path) -> None:
    sd = ["--backend", "diffusion", "--limit", "1", "--param", f"sd={stack['sd']}",
          "--param", "steps=2", "--param", f"resolution={SIZE}", "--param", "device=cpu"]
    out = tmp_path / "edit"
    edit = ["edit", "--plugin", "color", "--values", "red", "--out", str(out), *sd]
    refused = _cli(*edit)
    assert refused.exit_code != 0 and "has no ControlNet" in refused.output, refused.output
    assert "allow_no_controlnet=true" in refused.output
    assert not (out / "manifest.jsonl").exists()
    bench = tmp_path / "bench"
    refused = _cli("bench", "edits", "--attributes", "color", "--out", str(bench), *sd)
    assert refused.exit_code != 0 and "has no ControlNet" in refused.output, refused.output
    assert not (bench / "edits").exists()  # refused before anything was edited

    # the explicit opt-in runs; the manifest and run.json record the ablation's switches
    ablation = _cli(*edit, "--param", "allow_no_controlnet=true", "--param", "blend=false",
                    "--param", "energy=false")
    assert ablation.exit_code == 0, ablation.output
    (record,) = [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]
    applied = {k: record["parameters"][k] for k in ("controlnet", "blend", "energy")}
    assert applied == {"controlnet": False, "blend": False, "energy": False}
    params = json.loads((out / "run.json").read_text())["config"]["params"]
    assert {k: params[k] for k in ("allow_no_controlnet", "blend", "energy")} == \
        {"allow_no_controlnet": "true", "blend": "false", "energy": "false"}


# --- the contracts (segtk.testing), on the tiny stack ------------------------------------------


class TestDiffusionBackendContract(EditBackendSuite):
    """The edit backend contract: options declared and unknown ones refused, label and mask
    aligned, the same rng the same edit, inputs untouched, metadata JSON."""

    backend_cls = Gen4SegBackend

    @pytest.fixture(autouse=True)
    def _weights(self, stack) -> None:
        self.weights = stack

    def make(self, **extra) -> Gen4SegBackend:
        return Gen4SegBackend({**_options(self.weights, steps=2, resolution=32), **extra})


class TestReconContract(EditorSuite):
    """`recon` (the reference editor) meets the editor contract through the backend, on a
    whole-image sample: it reconstructs the whole image whatever the sample's mask, and says so
    with an all-True mask (it declares level "object", so an object's sample would come back
    with a mask other than its own)."""

    editor_cls = ReconEditor

    @pytest.fixture(autouse=True)
    def _weights(self, stack) -> None:
        self.weights = stack

    def make(self) -> ReconEditor:
        return ReconEditor(options=_options(self.weights, steps=2, resolution=32))

    def sample(self, seed: int = 0) -> Sample:
        return toy_sample(seed=seed, level="image")

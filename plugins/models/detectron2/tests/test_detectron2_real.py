"""detectron2 for real, in the environment scripts/install-detectron2.sh builds:

    bash scripts/install-detectron2.sh
    SEGTK_REQUIRE_DETECTRON2=1 OMP_NUM_THREADS=1 .venv-detectron2/bin/python -m pytest plugins/models/detectron2 -q

Three randomly initialised models (no trained weights exist here): detectron2's own Semantic FPN
config (configs/Misc/semantic_R_50_FPN_1x.yaml shrunk to ResNet-18 through opts=), the
Mask2Former-style `TinyMaskFormer` and the open-vocabulary `TinyOpenVocabSeg` with a tiny random
CLIP text encoder built offline. The adapter's labels must equal those of detectron2's
DefaultPredictor on the same images, exactly; then `segtk attack` and `segtk bench edits` run
on them through the CLI. Elsewhere these tests skip, naming what is missing, unless
SEGTK_REQUIRE_DETECTRON2=1 makes that a failure.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from segtk.cli import cli
from segtk.core import ModelError, Segmenter, load_dataset, load_segmenter
from segtk.testing import SegmenterSuite, requires_stack
from segtk_detectron2.segmenter import Detectron2Segmenter

FLAG = "SEGTK_REQUIRE_DETECTRON2"
pytestmark = requires_stack(
    ("detectron2", "detectron2._C", "transformers"), FLAG,
    how="bash scripts/install-detectron2.sh, then run with .venv-detectron2/bin/python",
)


@functools.lru_cache(maxsize=4)
def loaded(spec: str) -> Segmenter:
    """One loaded model per spec for the contract suite's tests (loading is the slow part)."""
    return load_segmenter(spec)


CONFIGS = Path(__file__).resolve().parent.parent / "configs"
DEMO = ["sky", "road", "sidewalk", "building", "vegetation", "car", "person", "pole"]
FPN_OPTS = {"MODEL.RESNETS.DEPTH": "18", "MODEL.RESNETS.RES2_OUT_CHANNELS": "64",
            "MODEL.FPN.OUT_CHANNELS": "32", "MODEL.SEM_SEG_HEAD.CONVS_DIM": "32",
            "MODEL.SEM_SEG_HEAD.NUM_CLASSES": "8", "INPUT.MIN_SIZE_TEST": "0",
            "INPUT.MAX_SIZE_TEST": "0"}


@dataclass
class Case:
    config: Path
    hook: str = ""  # add_config=
    opts: dict[str, str] = field(default_factory=dict)
    open_vocab: bool = False


def semantic_fpn_config() -> Path:
    from detectron2 import model_zoo

    return Path(model_zoo.get_config_file("Misc/semantic_R_50_FPN_1x.yaml"))


def tiny_clip(folder: Path) -> Path:
    """A random 1-layer CLIP text model with a character-level BPE tokenizer, saved offline."""
    import transformers as T
    from transformers.models.clip.tokenization_clip import bytes_to_unicode

    chars = list(bytes_to_unicode().values())
    vocab = {t: i for i, t in enumerate(chars + [c + "</w>" for c in chars]
                                        + ["<|startoftext|>", "<|endoftext|>"])}
    folder.mkdir(parents=True)
    (folder / "vocab.json").write_text(json.dumps(vocab))
    (folder / "merges.txt").write_text("#version: 0.2\n")
    tok = T.CLIPTokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"))
    eos, bos = (tok.convert_tokens_to_ids(t) for t in ("<|endoftext|>", "<|startoftext|>"))
    T.set_seed(0)
    model = T.CLIPTextModelWithProjection(T.CLIPTextConfig(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2, max_position_embeddings=77, projection_dim=16,
        eos_token_id=eos, pad_token_id=eos, bos_token_id=bos))
    out = folder / "clip"
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> dict[str, Case]:
    clip = tiny_clip(tmp_path_factory.mktemp("clip") / "raw")
    return {
        "semantic-fpn": Case(semantic_fpn_config(), opts=FPN_OPTS),
        "mask-former": Case(CONFIGS / "tiny_mask_former.yaml",
                            "segtk_detectron2.tiny:add_mask_former_config"),
        "open-vocab": Case(CONFIGS / "tiny_open_vocab.yaml",
                           "segtk_detectron2.tiny:add_open_vocab_config",
                           {"MODEL.OPEN_VOCAB.TEXT_ENCODER": str(clip)}, open_vocab=True),
    }


def reference_cfg(case: Case, weights: Path, names: list[str] = DEMO):
    """The cfg a detectron2 user writes by hand, independent of the adapter's code."""
    from detectron2.config import get_cfg
    from detectron2.data import MetadataCatalog

    cfg = get_cfg()
    if case.hook:
        module, _, func = case.hook.partition(":")
        getattr(importlib.import_module(module), func)(cfg)
    cfg.merge_from_file(str(case.config))
    cfg.merge_from_list([x for kv in case.opts.items() for x in kv])
    cfg.MODEL.WEIGHTS, cfg.MODEL.DEVICE = str(weights), "cpu"
    if case.open_vocab:
        name = "segtk_test_vocab_" + "_".join(names)
        if not hasattr(MetadataCatalog.get(name), "stuff_classes"):
            MetadataCatalog.get(name).set(stuff_classes=list(names))
        cfg.DATASETS.TEST = (name,)
    return cfg


@pytest.fixture(scope="module")
def weights(cases, tmp_path_factory) -> dict[str, Path]:
    """The models' own random initialisation (seed 0), saved as checkpoints. TinyMaskFormer's
    class and last mask-embedding layers are drawn at std 1: with the default init one class
    wins almost every pixel, which would make label equality a weak test."""
    from detectron2.modeling import build_model

    folder = tmp_path_factory.mktemp("weights")
    out = {}
    for name, case in cases.items():
        torch.manual_seed(0)
        model = build_model(reference_cfg(case, folder / "unused.pth"))
        if name == "mask-former":
            torch.nn.init.normal_(model.class_embed.weight, std=1.0)
            torch.nn.init.normal_(model.mask_embed[-1].weight, std=1.0)
        out[name] = folder / f"{name}.pth"
        torch.save({"model": model.state_dict()}, out[name])
    return out


def spec(case: Case, weights: Path, names: list[str] = DEMO, **extra: str) -> str:
    parts = [f"detectron2:{case.config}", str(weights),
             f"{'vocab' if case.open_vocab else 'classes'}={';'.join(names)}"]
    if case.hook:
        parts.append(f"add_config={case.hook}")
    opts = {**case.opts, **extra}
    if opts:
        parts.append("opts=" + ";".join(f"{k}={v}" for k, v in opts.items()))
    return ",".join(parts)


@pytest.fixture(scope="module")
def demo_images() -> tuple[np.ndarray, torch.Tensor]:
    """Four demo street scenes (160x120) as uint8 HWC and as segtk's float [B,3,H,W]."""
    from segtk.core import to_tensor
    items = list(load_dataset("demo", limit=4))
    arrays = np.stack([it.image for it in items])
    return arrays, to_tensor(list(arrays))


def predictor_labels(cfg, arrays: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """detectron2's DefaultPredictor on each image (it takes BGR uint8 HWC)."""
    from detectron2.engine import DefaultPredictor

    predictor = DefaultPredictor(cfg)
    scores = torch.stack([predictor(a[:, :, ::-1].copy())["sem_seg"] for a in arrays])
    return scores.argmax(1), scores


@pytest.mark.parametrize("name", ["semantic-fpn", "mask-former", "open-vocab"])
def test_labels_equal_detectron2s_default_predictor(name, cases, weights, demo_images) -> None:
    arrays, x = demo_images
    model = load_segmenter(spec(cases[name], weights[name]))
    assert model.classes == DEMO and model.num_classes == 8
    expected, scores = predictor_labels(reference_cfg(cases[name], weights[name]), arrays)
    # One image per call, as DefaultPredictor runs: the adapter computes exactly the same.
    single = torch.cat([model.logits(x[i:i + 1]) for i in range(4)])
    labels = torch.cat([model.predict(x[i:i + 1]) for i in range(4)])
    assert labels.shape == (4, 120, 160) and labels.dtype == torch.int64
    assert torch.equal(labels, expected)
    assert torch.equal(single, scores)
    assert len(labels.unique()) >= 3, "a degenerate random model would make equality meaningless"
    # One batched call differs from that by float rounding only (batched convolutions; 1 pixel
    # of 76,800 for TinyMaskFormer, whose masked attention thresholds at sigmoid 0.5).
    batched = model.predict(x)
    assert (batched == expected).float().mean() > 0.999
    torch.testing.assert_close(model.logits(x), scores, rtol=1e-3, atol=5e-3)


def test_the_checkpoint_is_what_runs(cases, weights) -> None:
    """Every parameter and buffer of the adapter's model comes from WEIGHTS, not its own init."""
    saved = torch.load(weights["mask-former"])["model"]
    torch.manual_seed(123)  # a different init: only loading can make them equal
    model = load_segmenter(spec(cases["mask-former"], weights["mask-former"]))
    assert isinstance(model, Detectron2Segmenter) and isinstance(model.model, torch.nn.Module)
    state = model.model.state_dict()
    assert state.keys() == saved.keys()
    assert all(torch.equal(state[k], saved[k]) for k in saved)


def test_open_vocabulary_follows_the_prompts(cases, weights, demo_images) -> None:
    """The class names are the model: reordering them permutes the scores, a subset of them
    gives that many channels, and the classifier is the CLIP text embedding of each prompt."""
    from segtk_detectron2.tiny import text_embeddings

    _, x = demo_images
    case, w = cases["open-vocab"], weights["open-vocab"]
    full = load_segmenter(spec(case, w)).logits(x)
    order = [5, 0, 7, 2, 1, 6, 3, 4]
    permuted = load_segmenter(spec(case, w, [DEMO[i] for i in order]))
    torch.testing.assert_close(permuted.logits(x), full[:, order], rtol=1e-5, atol=1e-5)
    three = load_segmenter(spec(case, w, ["car", "sky", "road"]))
    assert isinstance(three, Detectron2Segmenter)
    assert three.classes == ["car", "sky", "road"]
    torch.testing.assert_close(three.logits(x), full[:, [5, 0, 1]], rtol=1e-5, atol=1e-5)
    embeds = text_embeddings(case.opts["MODEL.OPEN_VOCAB.TEXT_ENCODER"],
                             [f"a photo of a {n}." for n in ["car", "sky", "road"]])
    assert isinstance(three.model, torch.nn.Module)
    torch.testing.assert_close(three.model.text_embeds, embeds)
    assert (embeds @ embeds.T - torch.eye(3)).abs().max() < 0.999  # distinct prompts


def test_wrong_class_count_and_missing_text_encoder_are_clear_errors(cases, weights,
                                                                     demo_images) -> None:
    _, x = demo_images
    seven = load_segmenter(spec(cases["semantic-fpn"], weights["semantic-fpn"], DEMO[:7]))
    with pytest.raises(ModelError, match="returned 8 score channels but 7 classes are named"):
        seven.predict(x)
    case = cases["open-vocab"]
    no_encoder = Case(case.config, case.hook, {}, open_vocab=True)
    with pytest.raises(ModelError, match="TEXT_ENCODER is empty"):
        load_segmenter(spec(no_encoder, weights["open-vocab"]))


def test_test_time_resize_agrees_with_default_predictor(cases, weights, demo_images) -> None:
    """With INPUT.MIN_SIZE_TEST the adapter resizes the float image in torch (antialiased
    bilinear) where DefaultPredictor resizes uint8 with PIL: close, not identical, by design."""
    arrays, x = demo_images
    case = Case(cases["semantic-fpn"].config,
                opts={**FPN_OPTS, "INPUT.MIN_SIZE_TEST": "180", "INPUT.MAX_SIZE_TEST": "1000"})
    labels = load_segmenter(spec(case, weights["semantic-fpn"])).predict(x)
    expected, _ = predictor_labels(reference_cfg(case, weights["semantic-fpn"]), arrays)
    assert labels.shape == expected.shape == (4, 120, 160)
    agreement = (labels == expected).float().mean().item()
    assert agreement > 0.9, agreement


def test_segtk_plugins_reports_detectron2_ok() -> None:
    rows = json.loads(CliRunner().invoke(cli, ["plugins", "--json"]).output)
    assert next(r for r in rows if r["name"] == "detectron2")["status"] == "ok"


@pytest.mark.parametrize("name", ["semantic-fpn", "open-vocab"])
def test_segtk_attack_end_to_end(name, cases, weights, tmp_path) -> None:
    out = tmp_path / "attack"
    result = CliRunner().invoke(cli, [
        "attack", "--plugin", "dla", "--model", spec(cases[name], weights[name]),
        "--data", "demo", "--limit", "2", "--budget", "6", "--out", str(out)])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(records) == 2
    for rec in records:
        assert 1 <= rec["queries"] <= 6 and rec["linf"] <= 8 + 1e-6
        assert (out / "images" / f"{rec['image']}.png").exists()
    assert "detectron2" in json.loads((out / "run.json").read_text())["config"]["model"]


def test_segtk_bench_edits_end_to_end(cases, weights, tmp_path) -> None:
    models = [spec(cases["mask-former"], weights["mask-former"]), "demo"]
    out = tmp_path / "edits"
    result = CliRunner().invoke(cli, [
        "bench", "edits", "--models", ",".join(models), "--attributes", "color",
        "--values", "color=red,blue", "--limit", "3", "--executor", "inline",
        "--out", str(out)])
    assert result.exit_code == 0, result.output
    table = json.loads((out / "table.json").read_text())
    assert table["models"] == models
    assert set(table["miou"][models[0]]) >= {"original", "color"}


class Detectron2Contract(SegmenterSuite):
    """The segmenter contract (segtk.testing) on each of the three random models."""

    case = "semantic-fpn"

    @pytest.fixture(autouse=True)
    def _spec(self, cases, weights) -> None:
        self.spec = spec(cases[self.case], weights[self.case])

    def make(self) -> Segmenter:
        return loaded(self.spec)


class TestSemanticFPNContract(Detectron2Contract):
    case = "semantic-fpn"
    # Its GroupNorm needs more than one value per group at stride 32: no 17x23 images.
    sizes = ((64, 96), (65, 97))


class TestMaskFormerContract(Detectron2Contract):
    case = "mask-former"


class TestOpenVocabContract(Detectron2Contract):
    case = "open-vocab"

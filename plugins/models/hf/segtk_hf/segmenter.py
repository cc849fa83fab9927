"""Hugging Face transformers semantic segmentation behind the Segmenter contract.

Three families, chosen from `config.model_type`:

* per-pixel heads (SegFormer, UperNet, BEiT/Data2Vec-vision, DPT, MobileViT, ...):
  `AutoModelForSemanticSegmentation` -> logits [B,C,h,w], bilinearly upsampled to the input
  size (what the image processors' `post_process_semantic_segmentation` does);
* mask classification (MaskFormer, Mask2Former, OneFormer): `AutoModelForUniversalSegmentation`,
  labels from the image processor's own `post_process_semantic_segmentation`, logits = the same
  class-probability x mask-probability scores it argmaxes;
* CLIPSeg: open vocabulary, one text prompt per class from the spec (`classes=a;b;c`).

Preprocessing follows the saved image processor (target size, rescale, mean/std) but runs in
float32 torch, batched, so attack perturbations below one 8-bit step are not rounded away. The
target size for an input size is read from the processor itself (on a blank image, cached), so
shortest-edge / size-divisor rules match it exactly; resampling is torch's antialiased
bilinear/bicubic, close to (not bit-equal with) the processor's PIL resize.

Weights come from a local folder or the local Hugging Face cache only (`local_files_only`),
unless the spec says `download`.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from segtk.core import (
    TEMP_SUFFIX,
    ModelError,
    ModuleTrainable,
    Segmenter,
    convert,
    labels_from_logits,
    parse_pairs,
)

HINT = ("syntax: hf:FOLDER_OR_REPO_ID[,classes=a;b;c][,prompt=a photo of {}][,size=WxH]"
        "[,revision=R][,download]")
UNIVERSAL = ("maskformer", "mask2former", "oneformer")
RESAMPLE = {0: "nearest", 2: "bilinear", 3: "bicubic"}  # PIL codes; others -> bilinear


OPTION_KINDS: dict[str, Any] = {"classes": list[str], "prompt": str, "size": tuple[int, int],
                                "revision": str, "download": bool}


def parse(arg: str) -> tuple[str, dict[str, Any]]:
    source, *options = [part.strip() for part in arg.split(",")] if arg else [""]
    if not source:
        raise ModelError("no model folder or repo id given", hint=HINT)
    given = parse_pairs(options, "hf option", ["classes", "prompt", "size", "revision"],
                        flags=["download"], error=ModelError, hint=HINT)
    opts: dict[str, Any] = {"classes": None, "prompt": "{}", "size": None, "revision": None,
                            "download": False}
    for key, value in given.items():
        opts[key] = convert(value, OPTION_KINDS[key], key, sep="x" if key == "size" else ";",
                            error=ModelError, hint=HINT)
    if "{}" not in opts["prompt"]:
        raise ModelError(f"prompt must contain {{}} for the class name, got {opts['prompt']!r}",
                         hint=HINT)
    if opts["size"] is not None:
        w, h = opts["size"]
        opts["size"] = (h, w)  # stored as (H, W)
    return source, opts


class HFSegmenter(Segmenter, ModuleTrainable):
    """Common preprocessing; subclasses implement `scores` (and may override `predict`).

    Per-pixel heads (SegFormer, UperNet, ...) are Trainable: `segtk train` fine-tunes them on
    the upsampled logits; mask-classification and CLIPSeg models refuse `train()`."""

    family = "per-pixel"

    def __init__(self, model, image_processor, classes: list[str], name: str,
                 size: tuple[int, int] | None = None, processor=None) -> None:
        self.model = model.eval()
        self.image_processor = image_processor
        self.processor = processor if processor is not None else image_processor
        self.classes = list(classes)
        self.name = name
        self.size = size
        ip = image_processor
        self.do_resize = bool(getattr(ip, "do_resize", True))
        self.scale = 255.0 * float(ip.rescale_factor) if getattr(ip, "do_rescale", False) else 255.0
        mean = ip.image_mean if getattr(ip, "do_normalize", False) else [0.0, 0.0, 0.0]
        std = ip.image_std if getattr(ip, "do_normalize", False) else [1.0, 1.0, 1.0]
        mean = [mean] * 3 if isinstance(mean, (int, float)) else list(mean)
        std = [std] * 3 if isinstance(std, (int, float)) else list(std)
        self._mean = torch.tensor(mean, dtype=torch.float32).view(1, 3, 1, 1)
        self._std = torch.tensor(std, dtype=torch.float32).view(1, 3, 1, 1)
        self.resample = RESAMPLE.get(int(getattr(ip, "resample", 2) or 2), "bilinear")
        self._sizes: dict[tuple[int, int], tuple[int, int]] = {}

    # --- preprocessing ---------------------------------------------------------------------

    def _processor_inputs(self, image: np.ndarray) -> dict[str, Any]:
        return self.image_processor(images=[image], return_tensors="pt")

    def model_size(self, height: int, width: int) -> tuple[int, int]:
        """(H, W) the processor would feed the model for an input of this size."""
        if self.size is not None:
            return self.size
        if not self.do_resize:
            return height, width
        key = (height, width)
        if key not in self._sizes:
            blank = np.zeros((height, width, 3), dtype=np.uint8)
            shape = self._processor_inputs(blank)["pixel_values"].shape
            self._sizes[key] = (int(shape[-2]), int(shape[-1]))
        return self._sizes[key]

    def preprocess(self, images: torch.Tensor) -> torch.Tensor:
        x = images.detach().to(self.device, torch.float32) * self.scale  # where the model is
        size = self.model_size(*x.shape[-2:])
        if tuple(x.shape[-2:]) != size:
            if self.resample == "nearest":
                x = F.interpolate(x, size=size, mode="nearest")
            else:
                x = F.interpolate(x, size=size, mode=self.resample, align_corners=False,
                                  antialias=True)
        return (x - self._mean) / self._std

    # --- outputs ---------------------------------------------------------------------------

    def forward(self, pixel_values: torch.Tensor):
        with torch.inference_mode(not self.training):  # train mode keeps the graph
            return self.model(pixel_values=pixel_values)

    def scores(self, images: torch.Tensor) -> torch.Tensor:
        out = self.forward(self.preprocess(images)).logits
        return _upsample(out, images)

    def logits(self, images: torch.Tensor) -> torch.Tensor:
        return self.scores(images).to(images.device)

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        if images.shape[0] == 0:
            return torch.empty(0, *images.shape[2:], dtype=torch.long)
        return labels_from_logits(self.scores(images)).to(images.device)

    # --- Trainable (segtk train) ---------------------------------------------------------------

    @property
    def trainable_module(self) -> torch.nn.Module:
        return self.model

    def train(self, mode: bool = True) -> HFSegmenter:
        if mode and self.family != "per-pixel":
            raise ModelError(f"{self.name}: {self.family} models cannot be trained by segtk train",
                             hint="fine-tune a per-pixel head instead (SegFormer, UperNet, DPT)")
        super().train(mode)
        return self

    def save(self, directory: str | Path) -> str:
        """save_pretrained (model.safetensors, config with the class names, image processor)
        into a temporary folder renamed to `directory`: `hf:DIRECTORY[,size=WxH]`."""

        directory = Path(directory)
        directory.parent.mkdir(parents=True, exist_ok=True)
        self.model.config.id2label = dict(enumerate(self.classes))
        self.model.config.label2id = {c: i for i, c in enumerate(self.classes)}
        # Hidden names ending in .tmp: a run removes those a kill leaves (segtk.storage.runs).
        tmp = Path(tempfile.mkdtemp(dir=directory.parent, prefix=f".{directory.name}.",
                                    suffix=TEMP_SUFFIX))
        try:
            self.model.save_pretrained(tmp, safe_serialization=True)
            self.processor.save_pretrained(tmp)
            old = directory.with_name(f".{directory.name}.old{TEMP_SUFFIX}")
            if directory.exists():
                shutil.rmtree(old, ignore_errors=True)
                directory.rename(old)
            tmp.rename(directory)
            shutil.rmtree(old, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        size = f",size={self.size[1]}x{self.size[0]}" if self.size else ""
        return f"hf:{directory}{size}"


def _upsample(scores: torch.Tensor, images: torch.Tensor) -> torch.Tensor:
    size = tuple(images.shape[-2:])
    if tuple(scores.shape[-2:]) != size:
        scores = F.interpolate(scores, size=size, mode="bilinear", align_corners=False)
    return scores


class UniversalSegmenter(HFSegmenter):
    """MaskFormer / Mask2Former / OneFormer: mask classification, semantic post-processing."""

    family = "mask classification"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.model_type = self.model.config.model_type
        self._task_inputs = None
        if self.model_type == "oneformer":
            blank = np.zeros((8, 8, 3), dtype=np.uint8)
            self._task_inputs = self.processor(images=[blank], task_inputs=["semantic"],
                                               return_tensors="pt")["task_inputs"]

    def _processor_inputs(self, image: np.ndarray) -> dict[str, Any]:
        if self.model_type == "oneformer":
            return self.image_processor(images=[image], task_inputs=["semantic"], return_tensors="pt")
        return self.image_processor(images=[image], return_tensors="pt")

    def forward(self, pixel_values: torch.Tensor):
        kwargs: dict[str, Any] = {"pixel_values": pixel_values}
        if self._task_inputs is not None:
            kwargs["task_inputs"] = self._task_inputs.expand(pixel_values.shape[0], -1)
        with torch.inference_mode():
            out = self.model(**kwargs)
        for name in ("class_queries_logits", "masks_queries_logits"):
            if not torch.isfinite(getattr(out, name)).all():
                raise ModelError(f"{self.name} returned NaN or infinite {name}")
        return out

    def scores(self, images: torch.Tensor) -> torch.Tensor:
        """The class scores post_process_semantic_segmentation argmaxes, at the input size."""
        out = self.forward(self.preprocess(images))
        masks = out.masks_queries_logits
        if self.model_type == "mask2former":  # the processor goes through 384x384 first
            masks = F.interpolate(masks, size=(384, 384), mode="bilinear", align_corners=False)
        classes = out.class_queries_logits.softmax(dim=-1)[..., :-1]
        return _upsample(torch.einsum("bqc,bqhw->bchw", classes, masks.sigmoid()), images)

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        if images.shape[0] == 0:
            return torch.empty(0, *images.shape[2:], dtype=torch.long)
        out = self.forward(self.preprocess(images))
        size = tuple(images.shape[-2:])
        maps = self.image_processor.post_process_semantic_segmentation(
            out, target_sizes=[size] * images.shape[0])
        return torch.stack(list(maps)).long().to(images.device)


class CLIPSegSegmenter(HFSegmenter):
    """CLIPSeg: one prompt per class; per-pixel scores are the per-prompt logits."""

    family = "open vocabulary"

    def __init__(self, *args, prompt: str = "{}", chunk: int = 16, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.prompts = [prompt.format(c) for c in self.classes]
        text = self.processor.tokenizer(self.prompts, padding=True, return_tensors="pt")
        with torch.inference_mode():
            self.text_embeddings = self.model.get_conditional_embeddings(
                batch_size=len(self.prompts), input_ids=text["input_ids"],
                attention_mask=text["attention_mask"])
        self.chunk = chunk

    def scores(self, images: torch.Tensor) -> torch.Tensor:
        x = self.preprocess(images)
        c = len(self.prompts)
        parts = []
        for start in range(0, x.shape[0], max(1, self.chunk // c)):
            part = x[start:start + max(1, self.chunk // c)]
            b = part.shape[0]
            with torch.inference_mode():
                out = self.model(pixel_values=part.repeat_interleave(c, dim=0),
                                 conditional_embeddings=self.text_embeddings.repeat(b, 1))
            parts.append(out.logits.reshape(b, c, *out.logits.shape[-2:]))
        return _upsample(torch.cat(parts), images)


# --- loading -------------------------------------------------------------------------------


def _source(source: str, opts: dict[str, Any]) -> tuple[str, dict[str, Any], bool]:
    path = Path(source).expanduser()
    kwargs: dict[str, Any] = {"local_files_only": not opts["download"]}
    if opts["revision"]:
        kwargs["revision"] = opts["revision"]
    if path.is_dir():
        return str(path), kwargs, True
    if path.exists() or source.startswith((".", "/", "~")) or source.count("/") > 1:
        raise ModelError(f"{source}: not a model folder",
                         hint="give a folder written by save_pretrained (config.json, weights, "
                              "preprocessor_config.json) or a Hugging Face repo id")
    return source, kwargs, False


def _not_cached(source: str, exc: Exception) -> ModelError:
    try:
        from huggingface_hub.constants import HF_HUB_CACHE as cache
    except ImportError:  # pragma: no cover
        cache = "~/.cache/huggingface/hub"
    return ModelError(
        f"hf: {source} is not in the local Hugging Face cache ({cache}) "
        f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})",
        hint=f"fetch it once with `hf download {source}` where there is network, point HF_HOME at "
             f"a cache that has it, give a local folder, or allow downloading: hf:{source},download",
    )


def load(arg: str) -> HFSegmenter:
    import transformers
    from transformers import AutoConfig

    source, opts = parse(arg)
    where, kwargs, local = _source(source, opts)
    if local and not (Path(where) / "config.json").is_file():
        raise ModelError(f"{source}: no usable config.json in the folder",
                         hint="save the model with model.save_pretrained(folder)")
    try:
        config = AutoConfig.from_pretrained(where, **kwargs)
    except (OSError, ValueError) as exc:
        if local:
            raise ModelError(f"{source}: no usable config.json ({type(exc).__name__}: {exc})",
                             hint="save the model with model.save_pretrained(folder)") from exc
        raise _not_cached(source, exc) from exc
    kind = config.model_type
    try:
        if kind == "clipseg":
            model = transformers.CLIPSegForImageSegmentation.from_pretrained(where, **kwargs)
        elif kind in UNIVERSAL:
            model = transformers.AutoModelForUniversalSegmentation.from_pretrained(where, **kwargs)
        else:
            try:
                model_cls: Any = transformers.AutoModelForSemanticSegmentation._model_mapping[type(config)]
            except KeyError as exc:
                raise ModelError(
                    f"{source}: model type {kind!r} has no semantic segmentation head in "
                    f"transformers {transformers.__version__}",
                    hint="supported: SegFormer, UperNet, BEiT, DPT, MobileViT, MaskFormer, "
                         "Mask2Former, OneFormer, CLIPSeg") from exc
            model = model_cls.from_pretrained(where, **kwargs)
    except OSError as exc:
        if local:
            raise ModelError(f"{source}: weights missing or unreadable ({exc})",
                             hint="save the model with model.save_pretrained(folder)") from exc
        raise _not_cached(source, exc) from exc
    processor, image_processor = _processors(where, kwargs, kind, source)
    name = f"hf:{Path(source).name if local else source}"
    size = opts["size"]
    if kind == "clipseg":
        if not opts["classes"]:
            raise ModelError(f"{name}: CLIPSeg is open-vocabulary and needs classes",
                             hint=f"add classes=a;b;c (one prompt each), e.g. hf:{source},"
                                  "classes=background;road;car,prompt=a photo of {}")
        return CLIPSegSegmenter(model, image_processor, opts["classes"], name, size,
                                processor=processor, prompt=opts["prompt"])
    classes = _classes(config, opts["classes"], name)
    cls = UniversalSegmenter if kind in UNIVERSAL else HFSegmenter
    return cls(model, image_processor, classes, name, size, processor=processor)


def _processors(where: str, kwargs: dict[str, Any], kind: str, source: str):
    from transformers import AutoImageProcessor, AutoProcessor

    try:
        if kind in ("clipseg", "oneformer"):  # processors with a tokenizer
            processor = AutoProcessor.from_pretrained(where, **kwargs)
            return processor, processor.image_processor
        image_processor = AutoImageProcessor.from_pretrained(where, use_fast=False, **kwargs)
        return image_processor, image_processor
    except (OSError, ValueError, TypeError) as exc:
        raise ModelError(
            f"hf:{source}: no usable image processor ({type(exc).__name__}: {str(exc).splitlines()[0]})",
            hint="save it beside the model: AutoImageProcessor.from_pretrained(...)"
                 ".save_pretrained(folder) (CLIPSeg/OneFormer: the whole processor, with tokenizer)",
        ) from exc


def _classes(config, override: list[str] | None, name: str) -> list[str]:
    id2label = {int(k): v for k, v in (config.id2label or {}).items()}
    n = config.num_labels
    if override:
        if len(override) != n:
            raise ModelError(f"{name} predicts {n} classes, classes= names {len(override)}",
                             hint="give one name per output class, in id order")
        return override
    if sorted(id2label) != list(range(n)):
        raise ModelError(f"{name}: config.id2label does not name classes 0..{n - 1}",
                         hint="add classes=a;b;c to the spec")
    return [str(id2label[i]) for i in range(n)]

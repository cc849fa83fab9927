"""Models and datasets from specs, as `--model` and `--data` read them, for the Python API.

A loaded object remembers the spec it came from, so a run made with it records that spec in
run.json (and `segtk ... --resume` can load it again).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar, cast

import torch

from segtk.api.data import dataset_of_object, is_data_object
from segtk.api.models import ModelKeywords
from segtk.core import Dataset, Segmenter, SegtkError, load_segmenter, parse_pairs
from segtk.core import load_dataset as load_dataset_spec
from segtk.core._data import pixel_limit
from segtk.core._device import resolve_device
from segtk.core._specs import require_labels

__all__ = ["load_model", "load_dataset", "model_of", "data_of", "spec_of", "split_of",
           "pairs_of", "comma_list", "specs_only", "pixel_limited"]

SPEC, SPLIT = "segtk_spec", "segtk_split"  # attributes a loaded object keeps its origin in
P = ParamSpec("P")
R = TypeVar("R")


def pixel_limited(function: Callable[P, R]) -> Callable[P, R]:
    """An API function that reads images under its keyword `max_pixels` (`--max-pixels`):
    images and label maps with more pixels are refused from their headers, before decoding
    (None: SEGTK_MAX_PIXELS, else core's DEFAULT_MAX_PIXELS)."""

    @functools.wraps(function)
    def limited(*args: P.args, **kwargs: P.kwargs) -> R:
        # a keyword of `function`'s signature, so typed there; pixel_limit checks it anyway
        with pixel_limit(cast("int | None", kwargs.get("max_pixels"))):
            return function(*args, **kwargs)

    return limited


def load_model(spec: str | Segmenter | torch.nn.Module, device: str | torch.device | None = "cpu",
               *, classes: Sequence[str] | None = None, mean: Sequence[float] | None = None,
               std: Sequence[float] | None = None,
               size: tuple[int, int] | None = None) -> Segmenter:
    """The model a `--model` spec names (see `segtk models`), e.g. "demo" or
    "espnet:camvid=../shared/models/espnet_camvid.safetensors", on `device` (cpu, cuda,
    cuda:N or auto: CUDA when present). A Segmenter is returned as it is (moved to `device`);
    a torch.nn.Module returning logits [B,K,H,W] is wrapped (`segtk.wrap`) with `classes`,
    `mean`, `std`, `size`."""
    keywords = ModelKeywords(classes, mean, std, size)
    if not isinstance(spec, str):
        return model_of(spec, device, keywords)
    keywords.apply(spec)  # keywords with a spec: refused
    model = load_segmenter(spec, device)
    setattr(model, SPEC, spec)
    return model


def load_dataset(spec: str, split: str | None = None, limit: int | None = None, *,
                 unlabelled: bool = False) -> Dataset:
    """The dataset a `--data` spec names (see `segtk datasets`), e.g. "demo" or
    "camvid:../shared/data/camvid". Iterating it yields items with `.name`, `.image` (uint8
    [H,W,3]) and `.label` (int64 [H,W], 255 = ignore), each read when it is reached.
    `unlabelled=True` also loads a folder without labels/ (every label 255), which only
    `segtk.attack` and `segtk.bench_attacks` with reference="prediction" accept."""
    data = load_dataset_spec(spec, split, limit, unlabelled)
    setattr(data, SPEC, spec)
    setattr(data, SPLIT, split)
    return data


def spec_of(obj: Any) -> str:
    """The spec a loaded model or dataset came from; for one made in Python, a description
    (run.json records it; such a run resumes from Python with the same object)."""
    return getattr(obj, SPEC, None) or f"<python object {type(obj).__name__} {obj.name}>"


def split_of(data: Dataset) -> str | None:
    return getattr(data, SPLIT, None)


def model_of(model: Any, device: str | torch.device | None = None,
             keywords: ModelKeywords | None = None) -> Segmenter:
    """A spec loaded on `device` (None: cpu), a loaded model, or a torch module wrapped with
    `keywords` (see segtk.wrap), moved to `device` if one is given and it is elsewhere (None:
    where it is)."""
    model = (keywords or ModelKeywords()).apply(model)
    if isinstance(model, str):
        return load_model(model, device)
    if not isinstance(model, Segmenter):
        raise SegtkError(f"model must be a spec (str), a segtk Segmenter or a torch.nn.Module, "
                         f"not {type(model).__name__}",
                         hint="e.g. segtk.load_model('demo'), or segtk.wrap(net, classes=[...]) "
                              "(see docs/python.md)")
    if device is not None and resolve_device(device) != resolve_device(model.device):
        model.to_device(resolve_device(device))
    return model


def data_of(data: Any, split: str | None, limit: int | None, unlabelled: bool = False,
            model: Segmenter | None = None, names: Sequence[str] | None = None) -> Dataset:
    """A spec loaded (its split and limit applied), or a loaded dataset cut to `limit`;
    `unlabelled`: a dataset without ground truth is welcome (see load_dataset). Tensors,
    (image, label) pairs or a DataLoader (see api.data) take their classes from `model`."""
    if isinstance(data, str):
        return load_dataset(data, split, limit, unlabelled=unlabelled)
    if not isinstance(data, Dataset) and is_data_object(data):
        if model is None:
            raise SegtkError("tensors, pairs or a DataLoader take their classes from the model; "
                             "here there is none", hint="load it with segtk.load_dataset(SPEC)")
        if split is not None:
            raise SegtkError("split= chooses the split of a dataset spec, not of tensors",
                             hint="pass the split's images")
        data = dataset_of_object(data, model.classes, names)
    if not isinstance(data, Dataset):
        raise SegtkError(f"data must be a spec (str), a segtk Dataset, (images, labels) tensors, "
                         f"(image, label) pairs or a DataLoader, not {type(data).__name__}",
                         hint="e.g. segtk.load_dataset('demo'), or (images [B,3,H,W] in [0,1], "
                              "labels [B,H,W])")
    if not unlabelled:
        require_labels(data)
    if split is not None:
        raise SegtkError("split= chooses the split of a dataset spec; this dataset is loaded "
                         "already", hint="pass segtk.load_dataset(SPEC, split=...) or the spec")
    if limit is None:
        return data
    cut = data.subset(limit=limit)
    for name in (SPEC, SPLIT):
        if hasattr(data, name):
            setattr(cut, name, getattr(data, name))
    return cut


def specs_only(models: str | Sequence[str], data: Any, what: str) -> list[str]:
    """A benchmark's model specs (one or a list) after checking that they, and `data`, are
    specs: its shards load them in their own workers, so loaded objects cannot be passed."""
    specs = [models] if isinstance(models, str) else list(models)
    for value, name in [*((m, "models") for m in specs), (data, "data")]:
        if not isinstance(value, str):
            raise SegtkError(f"{what} takes {name} as specs (str), not {type(value).__name__}: "
                             "each shard loads its own copy in its worker",
                             hint="pass the spec, e.g. 'demo' (see `segtk models`, "
                                  "`segtk datasets`)")
    return specs


def pairs_of(params: Mapping[str, Any] | Iterable[str] | None, what: str) -> dict[str, Any]:
    """Parameters as a dict: a dict as it is, or KEY=VALUE items as the CLI's `what` reads them."""
    if params is None:
        return {}
    if isinstance(params, Mapping):
        return dict(params)
    if isinstance(params, str):
        params = [params]
    return parse_pairs(params, what)


def comma_list(value: str | Iterable[Any]) -> list[Any]:
    """'a,b' -> ['a', 'b']; a list stays a list."""
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return list(value)

"""Turn `--model PLUGIN:ARG` and `--data FORMAT:PATH` into loaded objects via the registry."""

from __future__ import annotations

from functools import lru_cache

from segtk.core import registry
from segtk.core.data import Dataset
from segtk.core.errors import DataError, ModelError, SegtkError
from segtk.core.segmenter import Segmenter


def split_spec(spec: str) -> tuple[str, str]:
    """'espnet:camvid=w.safetensors' -> ('espnet', 'camvid=w.safetensors'); URLs -> ('http', url)."""
    if spec.startswith(("http://", "https://")):
        return "http", spec
    name, _, arg = spec.partition(":")
    return name.strip(), arg.strip()


def load_segmenter(spec: str) -> Segmenter:
    name, arg = split_spec(spec)
    plugin = registry.segmenter_plugin(name)
    try:
        model = plugin.load(arg)
    except SegtkError:
        raise
    except Exception as exc:
        raise ModelError(
            f"could not load model {spec!r}: {type(exc).__name__}: {exc}",
            hint=f"syntax: {plugin.syntax}  e.g. {plugin.example}",
        ) from exc
    return model


@lru_cache(maxsize=4)
def cached_segmenter(spec: str) -> Segmenter:
    """One loaded model per spec and process: benchmark workers reuse it across shards."""
    return load_segmenter(spec)


def load_dataset(spec: str, split: str | None = None, limit: int | None = None) -> Dataset:
    name, arg = split_spec(spec)
    plugin = registry.dataset_plugin(name)
    dataset = plugin.load(arg, split)
    if limit is not None:
        dataset = dataset.subset(limit=limit)
    if len(dataset) == 0:
        raise DataError(f"dataset {spec!r} has no images", hint=f"expected layout: {plugin.syntax}")
    return dataset


def check_compatible(model: Segmenter, dataset: Dataset) -> None:
    """A model can only be scored on labels from its own class list."""
    if model.num_classes != len(dataset.classes):
        raise DataError(
            f"model {model.name} predicts {model.num_classes} classes but dataset {dataset.name} "
            f"has {len(dataset.classes)}",
            hint="use a model trained on this dataset's classes (see `segtk models`)",
        )

"""Turn `--model PLUGIN:ARG` and `--data FORMAT:PATH` into loaded objects via the registry."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

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


SPEC_SUFFIX = ".spec"  # a file holding one spec, e.g. a training run's model.spec
HERE = "./"  # in a spec file: a path relative to the file's folder
_TOKENS = re.compile(r"([:,=])")  # PLUGIN:ARG, PLUGIN:KEY=PATH, PLUGIN:PATH,key=v


def relative_spec(spec: str, folder: Path) -> str:
    """`spec` as a spec file in `folder` holds it: each existing path inside `folder` written
    `./REL`, so a copied folder's file points into the copy. Other paths are kept as they are."""
    if spec.startswith(("http://", "https://")):
        return spec
    base = folder.resolve()
    tokens = _TOKENS.split(spec)
    for i in range(2, len(tokens), 2):  # tokens[0] is the plugin's name
        path = Path(tokens[i])
        try:
            if tokens[i] and path.exists():
                tokens[i] = HERE + path.resolve().relative_to(base).as_posix()
        except (ValueError, OSError):  # outside `folder`, or not a path
            continue
    return "".join(tokens)


def resolve_spec(spec: str, folder: Path) -> str:
    """The inverse of `relative_spec`: each `./REL` path joined to `folder` (the spec file's
    folder). Specs without one (absolute paths, as older files hold) are returned unchanged."""
    tokens = _TOKENS.split(spec)
    for i in range(2, len(tokens), 2):
        if tokens[i].startswith(HERE):
            tokens[i] = str(folder / tokens[i][len(HERE):])
    return "".join(tokens)


def read_spec_file(path: str | Path) -> str:
    """The spec a spec file holds (its first line), its `./` paths resolved against its folder."""
    path = Path(path)
    try:
        lines = path.read_text().strip().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise SegtkError(f"cannot read the model spec file {path}: {exc}",
                         hint="pass a spec (see `segtk models`) or a readable .spec file") from exc
    if not lines or not lines[0].strip():
        raise SegtkError(f"the model spec file {path} is empty",
                         hint="a training run writes OUT/model.spec after its first epoch")
    return resolve_spec(lines[0].strip(), path.parent)


def is_spec_file(spec: str) -> bool:
    """`--model runs/t/model.spec`: a spec file rather than a spec."""
    return spec.endswith(SPEC_SUFFIX) and Path(spec).is_file()


def load_segmenter(spec: str) -> Segmenter:
    if is_spec_file(spec):
        spec = read_spec_file(spec)
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

"""Turn `--model PLUGIN:ARG` and `--data FORMAT:PATH` into loaded objects via the registry."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import torch

from segtk.core import _registry as registry
from segtk.core._data import Dataset
from segtk.core._device import resolve_device
from segtk.core._errors import DataError, ModelError, NoSplits, SegtkError, naming
from segtk.core._inprocess import in_process_object
from segtk.core._params import convert
from segtk.core._segmenter import Segmenter


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


_WEIGHTS = {".safetensors", ".pth", ".pt", ".bin", ".ckpt", ".pkl"}  # KEY=WEIGHTS: the key says it
_FILE_SUFFIXES = _WEIGHTS | {".onnx", ".ts", ".spec", ".py"}


def _is_path(token: str) -> bool:
    return "/" in token or "\\" in token or Path(token).suffix.lower() in _FILE_SUFFIXES


def brief_spec(spec: str | None) -> str:
    """A spec as titles and chart legends show it, without any folder of a machine:
    'espnet:camvid=/x/w.safetensors' -> 'espnet:camvid' (KEY=WEIGHTS keeps its key),
    'hf:../models/segformer-b0' -> 'hf:segformer-b0' (another path its last part),
    'runs/t/model.spec' -> 't/model.spec'; 'demo' stays 'demo'."""
    if not spec:
        return "?"
    spec = spec.strip().rstrip("/\\")
    if spec.startswith(("http://", "https://")):
        return spec
    if spec.endswith(SPEC_SUFFIX) and ":" not in spec:
        path = Path(spec)
        return f"{path.parent.name}/{path.name}" if path.parent.name else path.name
    tokens = _TOKENS.split(spec)
    out = tokens[:1]
    for i in range(2, len(tokens), 2):
        sep, token = tokens[i - 1], tokens[i]
        name = Path(token.replace("\\", "/").rstrip("/")).name or token
        if not _is_path(token):
            out += [sep, token]
        elif sep != "=" or Path(name).suffix.lower() not in _WEIGHTS:  # its last part names it
            out += [sep, name]
    return "".join(out)


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


def load_segmenter(spec: str, device: str | torch.device | None = "cpu") -> Segmenter:
    """The model a `--model` spec names, on `device` (see `resolve_device`; adapters load on
    cpu, and `Segmenter.to_device` moves them)."""
    where = resolve_device(device)  # a missing CUDA: said before any loading
    obj = in_process_object(spec)
    if obj is not None:  # a Python object a benchmark in this process runs (core._inprocess)
        if where != resolve_device(obj.device):
            obj.to_device(where)
        return obj
    if is_spec_file(spec):
        spec = read_spec_file(spec)
    name, arg = split_spec(spec)
    plugin = registry.segmenter_plugin(name)
    names = None
    if not plugin.reads_classes:  # segtk reads classes= for the adapter (see pop_classes)
        arg, names = pop_classes(arg, plugin.syntax)
    try:
        model = plugin.load(arg)
    except SegtkError:
        raise
    except Exception as exc:
        raise ModelError(
            f"could not load model {spec!r}: {type(exc).__name__}: {exc}",
            hint=f"syntax: {plugin.syntax}  e.g. {plugin.example}",
        ) from exc
    model = model if names is None else rename_classes(model, names, spec)
    if where.type != "cpu":
        with naming(f"while moving model {spec!r} to {where}", ModelError, "the model"):
            model.to_device(where)
    return model


# --- classes= for every adapter -----------------------------------------------------------------

CLASSES_OPTION = "classes"
SPEC_CLASSES = "segtk_spec_classes"  # set on a model renamed by `classes=` (see saved_spec)


def pop_classes(arg: str, syntax: str = "") -> tuple[str, list[str] | None]:
    """'W.safetensors,classes=a;b' -> ('W.safetensors', ['a', 'b']): the `classes=` option of a
    spec's argument, taken out for adapters that do not read it themselves."""
    parts = arg.split(",") if arg else []
    given = [i for i, p in enumerate(parts) if "=" in p and p.partition("=")[0].strip() == CLASSES_OPTION]
    if not given:
        return arg, None
    hint = "classes=a;b;c names the model's outputs in order, separated by ';'" + (
        f"; syntax: {syntax}" if syntax else "")
    if len(given) > 1:
        raise ModelError(f"classes= is given twice in {arg!r}", hint=hint)
    names = convert(parts[given[0]].partition("=")[2], list[str], CLASSES_OPTION, sep=";",
                    error=ModelError, hint=hint)
    if not names:
        raise ModelError(f"classes= names no class in {arg!r}", hint=hint)
    return ",".join(parts[:given[0]] + parts[given[0] + 1:]), names


def rename_classes(model: Segmenter, names: list[str], spec: str) -> Segmenter:
    """`model` with its outputs named `names` (one per class, in order), as `classes=` says."""
    if len(names) != model.num_classes:
        raise ModelError(f"model {spec!r}: classes= names {len(names)} classes but the model "
                         f"predicts {model.num_classes} ({';'.join(model.classes)})",
                         hint="give one name per class the model predicts, in order")
    model.classes = list(names)
    setattr(model, SPEC_CLASSES, list(names))
    return model


def saved_spec(model: object, spec: str) -> str:
    """The spec a trained `model` saved itself as, with the `classes=` it was loaded with (an
    adapter that does not read classes= itself cannot save them)."""
    names = getattr(model, SPEC_CLASSES, None)
    return f"{spec},{CLASSES_OPTION}={';'.join(names)}" if names else spec


def cached_segmenter(spec: str, device: str | torch.device | None = "cpu") -> Segmenter:
    """One loaded model per spec, device and process: benchmark workers reuse it across shards."""
    if in_process_object(spec) is not None:  # never cached: the name is the running bench's
        return load_segmenter(spec, device)
    return _cached_segmenter(spec, str(resolve_device(device)))


@lru_cache(maxsize=4)
def _cached_segmenter(spec: str, device: str) -> Segmenter:
    return load_segmenter(spec, device)


# Dataset.extra's key on a dataset without ground truth (a folder without labels/): where the
# labels would be and the format's hint. Only label-free jobs (attacks with --reference
# prediction) take one; everything else refuses it as the format always did.
UNLABELLED = "unlabelled"


def require_labels(dataset: Dataset) -> None:
    """Refuse a dataset without ground truth, in the words its format uses for a missing
    labels folder, naming the one way segtk can use its images."""
    missing = dataset.extra.get(UNLABELLED)
    if missing:
        raise DataError(f"{missing['labels']}: labels folder not found",
                        hint=f"{missing['hint']}; to attack images without labels, score "
                             "against the model's clean prediction: --reference prediction "
                             "(Python: reference='prediction')")


def load_dataset(spec: str, split: str | None = None, limit: int | None = None,
                 unlabelled: bool = False) -> Dataset:
    """The dataset `spec` names; one without ground truth (see UNLABELLED) only with
    `unlabelled=True`."""
    obj = in_process_object(spec)  # a Python object a benchmark in this process runs
    if obj is not None:
        return obj if limit is None else obj.subset(limit=limit)
    name, arg = split_spec(spec)
    plugin = registry.dataset_plugin(name)
    dataset = plugin.load(arg, split)
    if not unlabelled:
        require_labels(dataset)
    if limit is not None:
        dataset = dataset.subset(limit=limit)
    if len(dataset) == 0:
        raise DataError(f"dataset {spec!r} has no images", hint=f"expected layout: {plugin.syntax}")
    return dataset


def preferred_split(spec: str, split: str) -> str | None:
    """`split` where the dataset `spec` has splits, None (the whole dataset) where it has none:
    the default of an option such as `segtk train --split`, which prefers a split the user did
    not ask for and so must not fail on a dataset without splits (demo, folder, flat folders).
    Any other problem (no such split among several, a missing folder) is raised as it is."""
    try:
        load_dataset(spec, split, 1)
    except NoSplits:
        return None
    return split

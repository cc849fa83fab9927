"""segtk plugin: ESPNet (Mehta et al., ECCV 2018) with the published CamVid/Cityscapes weights.

    --model espnet:camvid=PATH.safetensors
    --model espnet:cityscapes=PATH.safetensors
    segtk models convert espnet IN.pth OUT.safetensors
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save

from segtk.core import ModelError, SegmenterPlugin, atomic_write_bytes, hookimpl, parse_pairs
from segtk_espnet.network import ESPNet, ESPNetConfig, infer_config
from segtk_espnet.segmenter import CAMVID, CITYSCAPES, VARIANTS, ESPNetSegmenter, Variant

__all__ = [
    "CAMVID", "CITYSCAPES", "ESPNet", "ESPNetSegmenter", "build_network", "convert",
    "load", "load_weights", "register_models",
]  # fmt: skip

SYNTAX = "espnet:camvid=PATH.safetensors | espnet:cityscapes=PATH.safetensors"
EXAMPLE = "--model espnet:camvid=../shared/models/espnet_camvid.safetensors"
CONVERT_HINT = "convert the published .pth with `segtk models convert espnet IN.pth OUT.safetensors`"


def _keys_summary(keys: list[str], n: int = 5) -> str:
    shown = ", ".join(keys[:n])
    return shown + (f" (+{len(keys) - n} more)" if len(keys) > n else "")


def build_network(state: Mapping[str, torch.Tensor], source: str) -> tuple[ESPNet, ESPNetConfig]:
    """An ESPNet shaped after `state` (classes, p, q, decoder variant), loaded strictly.

    Any mismatch is a ModelError naming `source` and a few missing/unexpected keys.
    """
    try:
        config = infer_config(state)
    except (KeyError, ValueError, IndexError, AttributeError) as exc:
        raise ModelError(
            f"{source}: not an ESPNet checkpoint ({type(exc).__name__}: {exc}); "
            f"keys start with: {_keys_summary(sorted(state), 3)}",
            hint="expected the published ESPNet (with decoder) weights; " + CONVERT_HINT,
        ) from exc
    net = config.build()
    expected = net.state_dict()
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    wrong = [
        f"{k} {tuple(state[k].shape)} != {tuple(v.shape)}"
        for k, v in expected.items()
        if k in state and tuple(state[k].shape) != tuple(v.shape)
    ]
    if missing or unexpected or wrong:
        parts = []
        if missing:
            parts.append(f"missing keys: {_keys_summary(missing)}")
        if unexpected:
            parts.append(f"unexpected keys: {_keys_summary(unexpected)}")
        if wrong:
            parts.append(f"wrong shapes: {_keys_summary(wrong, 3)}")
        raise ModelError(
            f"{source}: does not fit ESPNet (classes={config.classes}, p={config.p}, "
            f"q={config.q}): " + "; ".join(parts),
            hint="the file must hold the published ESPNet weights; " + CONVERT_HINT,
        )
    net.load_state_dict(dict(state), strict=True)
    return net.eval(), config


def load_weights(path: str | Path) -> dict[str, torch.Tensor]:
    """The tensors of a .safetensors file; ModelError naming the path if absent or unreadable."""

    path = Path(path)
    if not path.is_file():
        raise ModelError(
            f"{path}: weights file not found",
            hint=f"give the path of a .safetensors file, e.g. {EXAMPLE}; " + CONVERT_HINT,
        )
    try:
        return load_file(str(path), device="cpu")
    except (SafetensorError, OSError, ValueError) as exc:
        hint = CONVERT_HINT if path.suffix in (".pth", ".pt", ".tar") else "re-download or re-convert it"
        raise ModelError(f"{path}: not a readable safetensors file ({exc})", hint=hint) from exc


def load(arg: str) -> ESPNetSegmenter:
    """`camvid=PATH` or `cityscapes=PATH` -> a ready segmenter."""
    syntax = f"syntax: {SYNTAX}  e.g. {EXAMPLE}"
    ((name, path),) = parse_pairs([arg], "espnet variant", error=ModelError, hint=syntax).items()
    name = name.lower()
    if name not in VARIANTS or not path:
        raise ModelError(
            f"espnet: unknown or missing variant in {arg!r} (known: {', '.join(VARIANTS)})",
            hint=syntax,
        )
    variant: Variant = VARIANTS[name]
    net, config = build_network(load_weights(path), path)
    if config.classes != variant.outputs:
        others = [v.name for v in VARIANTS.values() if v.outputs == config.classes]
        raise ModelError(
            f"{path}: has {config.classes} outputs, but espnet:{name} expects {variant.outputs}",
            hint=f"use espnet:{others[0]}={path}" if others else f"syntax: {SYNTAX}",
        )
    return ESPNetSegmenter(net, variant)


def _read_pth(path: Path) -> dict[str, torch.Tensor]:
    if not path.is_file():
        raise ModelError(f"{path}: checkpoint not found", hint="give the path of the published .pth")
    try:
        obj = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:  # pickle errors come in many types
        raise ModelError(
            f"{path}: cannot read it as a PyTorch checkpoint ({type(exc).__name__}: {exc})",
            hint="expected a .pth saved with torch.save holding only tensors (weights_only)",
        ) from exc
    for key in ("state_dict", "model"):
        if isinstance(obj, Mapping) and isinstance(obj.get(key), Mapping):
            obj = obj[key]
            break
    if not isinstance(obj, Mapping) or not obj or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in obj.items()
    ):
        raise ModelError(
            f"{path}: no state dict (name -> tensor) found",
            hint="expected a raw state dict or one under 'state_dict' or 'model'",
        )
    state = {}
    for key, value in obj.items():
        key = key.removeprefix("module.")  # saved from nn.DataParallel
        if key.endswith(".num_batches_tracked"):
            continue  # a PyTorch >= 0.4 BatchNorm counter; no effect at inference
        state[key] = value
    return state


def convert(in_pth: str, out_safetensors: str) -> None:
    """Published ESPNet .pth -> .safetensors, checked to load strictly, written atomically."""

    src = Path(in_pth)
    state = _read_pth(src)
    net, _ = build_network(state, str(src))
    tensors = {k: v.detach().to("cpu").contiguous().clone() for k, v in net.state_dict().items()}
    atomic_write_bytes(out_safetensors, save(tensors, metadata={"source": src.name}))


@hookimpl
def register_models(register) -> None:
    register(
        SegmenterPlugin(
            name="espnet",
            load=load,
            syntax=SYNTAX,
            example=EXAMPLE,
            description="ESPNet (Mehta et al. 2018), p=2 q=8; CamVid 11 classes or Cityscapes 19",
            requires=("safetensors",),
            convert=convert,
        )
    )

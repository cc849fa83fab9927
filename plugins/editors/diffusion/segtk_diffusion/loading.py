"""Offline loading of diffusers-format weights: local folders or the Hugging Face cache only."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from segtk.core import ModelError

SUBFOLDERS = ("unet", "vae", "text_encoder", "tokenizer", "scheduler")
LAYOUT = (
    "a diffusers-format folder holding unet/ vae/ text_encoder/ tokenizer/ scheduler/ "
    "(what `save_pretrained` writes), or a model id already in the Hugging Face cache; "
    "nothing is downloaded"
)
FLAGS = {
    "sd": ("--sd PATH", "a Stable Diffusion text-to-image model (SD 2.1-base in the paper)"),
    "controlnet": ("--controlnet PATH", "a segmentation ControlNet for the --sd model"),
    "inpaint": ("--inpaint PATH", "a Stable Diffusion inpainting model (UNet with 9 inputs)"),
    "inpaint_controlnet": ("--inpaint-controlnet PATH",
                           "a segmentation ControlNet for the --inpaint model"),
}


@dataclass
class SDStack:
    """The parts of one Stable Diffusion model that the backend uses."""

    path: str
    unet: Any
    vae: Any
    text_encoder: Any
    tokenizer: Any
    scheduler: Any
    controller: Any = None  # attention.Controller once processors are installed

    @property
    def vae_factor(self) -> int:
        return 2 ** (len(self.vae.config.block_out_channels) - 1)

    @property
    def scaling(self) -> float:
        return float(self.vae.config.scaling_factor)


def missing_option(option: str, needed_for: str) -> ModelError:
    flag, what = FLAGS[option]
    return ModelError(
        f"{needed_for} needs `{option}` ({flag}): {what}; it was not given",
        hint=f"pass {flag} ({LAYOUT})",
    )


def _check_exists(path: str, option: str, subfolders: tuple[str, ...]) -> Path | None:
    """The local folder (with its sub-folders checked), or None for a cache id."""
    flag = FLAGS[option][0].split()[0]
    p = Path(path).expanduser()
    if p.is_dir():
        absent = [s for s in subfolders if not (p / s).is_dir()]
        if absent:
            raise ModelError(
                f"{flag} {path}: the folder lacks {', '.join(s + '/' for s in absent)}",
                hint=f"{flag} wants {LAYOUT}",
            )
        return p
    if p.exists() or path.startswith((".", "/", "~")) or path.count("/") != 1:
        raise ModelError(f"{flag} {path}: no such folder", hint=f"{flag} wants {LAYOUT}")
    return None  # "org/name": looked up in the Hugging Face cache, offline


def _load(option: str, path: str, part: str, fn, cached: bool = False):
    flag = FLAGS[option][0].split()[0]
    try:
        return fn()
    except Exception as exc:  # OSError, EnvironmentError, ValueError from a bad or absent file
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        where = f"{part}/ of " if part else ""
        if cached:
            msg = f"{flag} {path}: no such folder, and not in the Hugging Face cache ({first})"
        else:
            msg = f"{flag} {path}: cannot load {where}it ({first})"
        raise ModelError(msg, hint=f"{flag} wants {LAYOUT}") from exc


def _has_accelerate() -> bool:
    """diffusers loads big checkpoints faster with accelerate; without it, say so quietly."""
    return importlib.util.find_spec("accelerate") is not None


def load_stack(path: str, option: str, device: torch.device, dtype: torch.dtype) -> SDStack:
    """UNet, VAE, CLIP text encoder, tokenizer and a DDIM scheduler, with local_files_only."""
    from diffusers import AutoencoderKL, DDIMScheduler, UNet2DConditionModel
    from transformers import CLIPTextModel, CLIPTokenizer

    local = _check_exists(path, option, SUBFOLDERS)
    src = str(local) if local is not None else path
    kw: dict[str, Any] = {"local_files_only": True}
    dkw = {**kw, "torch_dtype": dtype, "low_cpu_mem_usage": _has_accelerate()}
    unet = _load(option, path, "unet", lambda: UNet2DConditionModel.from_pretrained(
        src, subfolder="unet", **dkw), cached=local is None)
    vae = _load(option, path, "vae", lambda: AutoencoderKL.from_pretrained(
        src, subfolder="vae", **dkw))
    text_encoder = _load(option, path, "text_encoder", lambda: CLIPTextModel.from_pretrained(
        src, subfolder="text_encoder", **kw))
    tokenizer = _load(option, path, "tokenizer", lambda: CLIPTokenizer.from_pretrained(
        src, subfolder="tokenizer", **kw))
    config = _load(option, path, "scheduler", lambda: DDIMScheduler.load_config(
        src, subfolder="scheduler", **kw))
    scheduler = DDIMScheduler.from_config(config)
    pred = scheduler.config.prediction_type
    if pred not in ("epsilon", "v_prediction"):
        raise ModelError(f"{FLAGS[option][0].split()[0]} {path}: prediction type {pred!r} "
                         "is not supported (epsilon or v_prediction)")
    for m in (unet, vae, text_encoder):
        m.to(device=device, dtype=dtype).eval().requires_grad_(False)
    return SDStack(path, unet, vae, text_encoder, tokenizer, scheduler)


def load_controlnet(path: str, option: str, device: torch.device, dtype: torch.dtype):
    from diffusers import ControlNetModel

    p = Path(path).expanduser()
    sub = {}
    if p.is_dir():
        if (p / "controlnet").is_dir() and not (p / "config.json").is_file():
            sub = {"subfolder": "controlnet"}
    else:
        _check_exists(path, option, ())
    src = str(p) if p.is_dir() else path
    net = _load(option, path, "", lambda: ControlNetModel.from_pretrained(
        src, local_files_only=True, torch_dtype=dtype, low_cpu_mem_usage=_has_accelerate(),
        **sub), cached=not p.is_dir())
    return net.to(device=device, dtype=dtype).eval().requires_grad_(False)


def check_pair(controlnet, unet, option: str, base: str) -> None:
    """A ControlNet must belong to the same base model as the UNet it steers."""
    a = controlnet.config.cross_attention_dim
    b = unet.config.cross_attention_dim
    if a != b:
        flag = FLAGS[option][0]
        raise ModelError(
            f"{flag}: this ControlNet was trained for another base model "
            f"(text width {a}) than the {FLAGS[base][0].split()[0]} model (text width {b})",
            hint=f"give a segmentation ControlNet of the same family as {FLAGS[base][0]}"
            + (" with --inpaint-controlnet PATH" if base == "inpaint" else ""),
        )

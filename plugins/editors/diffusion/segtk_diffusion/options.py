"""The diffusion backend's options: one dataclass, read from `--param` strings or Python values."""

from __future__ import annotations

import typing
from dataclasses import dataclass, fields
from typing import Any

import torch

from segtk.core import DataError, declared

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


@dataclass
class DiffusionOptions:
    """Every knob of the backend; `from_dict(dict)` fills it (an unknown key is refused)."""

    sd: str | None = None  # text-to-image model (SD 2.1-base in the paper)
    controlnet: str | None = None  # seg ControlNet for `sd` (label-conditioned appearance edits)
    allow_no_controlnet: bool = False  # run without any ControlNet (ablations only): see README
    inpaint: str | None = None  # SD inpainting model (geometry)
    inpaint_controlnet: str | None = None  # seg ControlNet for `inpaint`; default: `controlnet`
    steps: int = 50  # DDIM steps (inversion and editing alike)
    guidance: float = 7.5  # classifier-free guidance scale
    energy: bool = True  # Eqs. 5-6 mask-guidance energy on object edits (Table VIII's "Loss")
    blend: bool = True  # Eq. 7 latent blending outside the mask (Table VIII's "Blend")
    eta: float = 30.0  # Eq. 6 step size on the latent (the paper gives no value)
    energy_until: float = 0.3  # energy guidance in the first 30 % of steps (official: 15 of 50)
    energy_iters: int = 20  # at most this many Eq. 6 updates per step (official max_iter)
    energy_threshold: float = 0.2  # ... while the energy is above this (official threshold)
    energy_form: str = "ratio"  # "ratio" (official code) or "paper" (Eq. 5 as printed)
    feature_injection: float = 0.8  # Eq. 3 threshold, fraction of steps
    attention_injection: float = 0.5  # Eq. 4 threshold, fraction of steps
    controlnet_scale: float = 1.0
    resolution: int = 512  # long side of the working size (SD 2.1-base: 512)
    background_prompt: str = ""  # geometry repaint prompt when `moved` names none (official: "")
    negative_prompt: str = ""  # the unconditional prompt of CFG
    palette: Any = None  # colours of the control image: None = VOC bit palette, or [K,3] / file
    paste_background: bool = False  # appearance: paste original pixels outside the mask
    seed: int = 0  # torch seed when a method gets rng=None
    device: str | None = None  # default: cuda when available, else cpu
    dtype: str = "float32"

    @classmethod
    def from_dict(cls, options: dict[str, Any]) -> DiffusionOptions:
        """The options given (`--param` text read as each field's type, or Python values); an
        unknown key is refused with segtk's one error for it, naming every option."""
        kinds = typing.get_type_hints(cls)
        given = declared(cls).read(options, "edit-backend", "diffusion")
        opts = cls(**{k: v for k, v in given.items() if v is not None})
        for f in fields(cls):  # a Python value must already be a bool (1 is not "on")
            if kinds[f.name] is bool and not isinstance(getattr(opts, f.name), bool):
                raise DataError(f"{f.name} must be true or false, got {getattr(opts, f.name)!r}")
        for k in ("steps", "energy_iters", "resolution", "seed"):  # Python values, e.g. 20.0
            setattr(opts, k, int(getattr(opts, k)))
        for k in ("guidance", "eta", "energy_until", "energy_threshold", "feature_injection",
                  "attention_injection", "controlnet_scale"):
            setattr(opts, k, float(getattr(opts, k)))
        for k in ("sd", "controlnet", "inpaint", "inpaint_controlnet"):
            path = getattr(opts, k)
            if path is not None and not isinstance(path, str):
                setattr(opts, k, str(path))  # a Path from Python
        if opts.steps < 1:
            raise DataError(f"steps must be at least 1, got {opts.steps}")
        if opts.energy_form not in ("ratio", "paper"):
            raise DataError(f"energy_form must be 'ratio' or 'paper', got {opts.energy_form!r}")
        if opts.dtype not in DTYPES:
            raise DataError(f"dtype must be one of {sorted(DTYPES)}, got {opts.dtype!r}")
        return opts


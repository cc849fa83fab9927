"""The Gen4Seg editing backend: mask-guided appearance editing, geometry repainting, Recon.

Appearance (Sec. III-B3): DDIM inversion of the real image with the source prompt gives the
source trajectory z_t; the editing branch starts from the same z_T. Every step runs one UNet
call on [source, edit-uncond, edit-cond] with PnP injection (Eq. 3 features for the first 80 %
of the steps, Eq. 4 self-attention q/k for the first 50 %), optionally a seg ControlNet on the
colourised label; for object edits first the mask-guidance energy (Eq. 5) on the cross-attention
of the edit tokens moves the editing latent by -eta * grad (Eq. 6), and after the DDIM step the
latent outside the mask is replaced by the source latent at the same noise level (Eq. 7).

Geometry (Sec. III-C): the caller's rigid transform `moved`, then an SD inpainting UNet (with a
seg ControlNet on the moved label when given) repaints the uncovered area M - M∩M* under a 5×5
dilated, 3×3 smoothed soft mask, composited over `moved` with that soft mask.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from segtk.core.editing import EditedSample, Sample
from segtk.core.errors import DataError, ModelError
from segtk_diffusion import attention, imaging
from segtk_diffusion.loading import (
    SDStack,
    check_pair,
    load_controlnet,
    load_stack,
    missing_option,
)

_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


@dataclass
class DiffusionOptions:
    """Every knob of the backend; `get_backend(dict)` fills it (unknown keys warn)."""

    sd: str | None = None  # text-to-image model (SD 2.1-base in the paper)
    controlnet: str | None = None  # seg ControlNet for `sd` (label-conditioned appearance edits)
    inpaint: str | None = None  # SD inpainting model (geometry)
    inpaint_controlnet: str | None = None  # seg ControlNet for `inpaint`; default: `controlnet`
    steps: int = 50  # DDIM steps (inversion and editing alike)
    guidance: float = 7.5  # classifier-free guidance scale
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
        names = {f.name: f for f in dataclasses.fields(cls)}
        kwargs, unknown = {}, []
        for key, value in options.items():
            k = key.replace("-", "_")
            if k not in names:
                unknown.append(key)
            elif value is not None:
                kwargs[k] = value
        if unknown:
            warnings.warn(f"diffusion backend: ignoring unknown options {sorted(unknown)}",
                          stacklevel=3)
        opts = cls(**kwargs)
        for k in ("steps", "energy_iters", "resolution", "seed"):
            setattr(opts, k, int(getattr(opts, k)))
        for k in ("guidance", "eta", "energy_until", "energy_threshold", "feature_injection",
                  "attention_injection", "controlnet_scale"):
            setattr(opts, k, float(getattr(opts, k)))
        if isinstance(opts.paste_background, str):  # from a `--param key=value` string
            opts.paste_background = opts.paste_background.strip().lower() in (
                "1", "true", "yes", "on")
        if opts.steps < 1:
            raise DataError(f"steps must be at least 1, got {opts.steps}")
        if opts.energy_form not in ("ratio", "paper"):
            raise DataError(f"energy_form must be 'ratio' or 'paper', got {opts.energy_form!r}")
        if opts.dtype not in _DTYPES:
            raise DataError(f"dtype must be one of {sorted(_DTYPES)}, got {opts.dtype!r}")
        return opts


_STACKS: dict[tuple, Any] = {}  # loaded weights, shared by backends with the same paths


def clear_cache() -> None:
    _STACKS.clear()


@dataclass
class Trace:
    """Per-step internals of the last appearance run, kept only when `backend.record` is set."""

    edit: list[torch.Tensor] = dataclasses.field(default_factory=list)  # after blending
    source: list[torch.Tensor] = dataclasses.field(default_factory=list)  # source, same level
    energy: list[tuple[float, float]] = dataclasses.field(default_factory=list)  # before, after
    mask: torch.Tensor | None = None  # the latent-resolution blend mask


class Gen4SegBackend:
    """Implements `appearance`, `geometry` and `recon` for `segtk edit` and the editors."""

    def __init__(self, options: DiffusionOptions) -> None:
        self.options = options
        o = options
        dev = o.device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.device = torch.device(dev)
        self.dtype = _DTYPES[o.dtype]
        self.palette = imaging.load_palette(o.palette)
        self.record = False
        self.last_trace: Trace | None = None
        for opt in ("sd", "controlnet", "inpaint", "inpaint_controlnet"):
            path = getattr(o, opt)
            if path is not None and not isinstance(path, str):
                setattr(o, opt, str(path))

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> Gen4SegBackend:
        return cls(DiffusionOptions.from_dict(options))

    # ---------------------------------------------------------------- loading
    def check(self, *kinds: str) -> None:
        """Load now what `kinds` ("appearance", "recon", "geometry") need; raise if not given."""
        for kind in kinds or ("appearance", "geometry"):
            if kind in ("appearance", "recon"):
                self._sd()
                self._controlnet()
            elif kind == "geometry":
                self._inpaint()
                self._inpaint_controlnet()
            else:
                raise ValueError(f"unknown edit kind {kind!r}")

    def _cached(self, key: tuple, load):
        key = (*key, str(self.device), str(self.dtype))
        if key not in _STACKS:
            _STACKS[key] = load()
        return _STACKS[key]

    def _sd(self) -> SDStack:
        if not self.options.sd:
            raise missing_option("sd", "diffusion appearance editing and recon")

        def load():
            stack = load_stack(self.options.sd, "sd", self.device, self.dtype)
            stack.controller = attention.install(stack.unet)
            return stack

        return self._cached(("sd", self.options.sd), load)

    def _controlnet(self):
        if not self.options.controlnet:
            return None
        net = self._cached(("controlnet", self.options.controlnet), lambda: load_controlnet(
            self.options.controlnet, "controlnet", self.device, self.dtype))
        check_pair(net, self._sd().unet, "controlnet", "sd")
        return net

    def _inpaint(self) -> SDStack:
        if not self.options.inpaint:
            raise missing_option("inpaint", "diffusion geometry editing")
        stack = self._cached(("inpaint", self.options.inpaint), lambda: load_stack(
            self.options.inpaint, "inpaint", self.device, self.dtype))
        if stack.unet.config.in_channels != 9:
            raise ModelError(
                f"--inpaint {self.options.inpaint}: its UNet takes "
                f"{stack.unet.config.in_channels} input channels, not 9: not an inpainting model",
                hint="give an SD inpainting model (e.g. stable-diffusion-inpainting) in "
                "diffusers format",
            )
        return stack

    def _inpaint_controlnet(self):
        o = self.options
        path, option = (o.inpaint_controlnet, "inpaint_controlnet") if o.inpaint_controlnet \
            else (o.controlnet, "controlnet")
        if not path:
            return None
        net = self._cached(("controlnet", path), lambda: load_controlnet(
            path, option, self.device, self.dtype))
        check_pair(net, self._inpaint().unet, option, "inpaint")
        return net

    # ---------------------------------------------------------------- pieces
    def _torch_seed(self, rng: np.random.Generator | None) -> int:
        if rng is None:
            return self.options.seed
        return int(rng.integers(0, 2**31 - 1))

    def _embed(self, stack: SDStack, prompts: list[str]) -> torch.Tensor:
        tok = stack.tokenizer
        ids = tok(prompts, padding="max_length", max_length=tok.model_max_length,
                  truncation=True, return_tensors="pt").input_ids
        with torch.no_grad():
            return stack.text_encoder(ids.to(self.device))[0].to(self.dtype)

    def _token_ids(self, stack: SDStack, text: str) -> list[int]:
        tok = stack.tokenizer
        return tok(text, padding="max_length", max_length=tok.model_max_length,
                   truncation=True).input_ids

    def _edit_tokens(self, stack: SDStack, prompt_src: str, prompt_edit: str,
                     phrases: list[str]) -> tuple[list[int], list[int], str]:
        """Positions of the intent edit tokens S' in the edit prompt, and of all its tokens S*.

        S' = the tokens of the attribute value and of the class name where they occur in the
        edit prompt; else the tokens that the source prompt lacks; else every prompt token.
        """
        tok = stack.tokenizer
        ids = self._token_ids(stack, prompt_edit)
        eos = tok.eos_token_id
        end = ids.index(eos, 1) if eos in ids[1:] else len(ids)
        words = list(range(1, end))
        found: list[int] = []
        for phrase in phrases:
            sub = tok(phrase, add_special_tokens=False).input_ids if phrase.strip() else []
            for i in range(1, end - len(sub) + 1) if sub else ():
                if ids[i:i + len(sub)] == sub:
                    found.extend(range(i, i + len(sub)))
        if found:
            return sorted(set(found)), words, "value/class tokens"
        src = set(self._token_ids(stack, prompt_src))
        diff = [i for i in words if ids[i] not in src]
        if diff:
            return diff, words, "tokens not in the source prompt"
        return words, words, "all prompt tokens"

    def _alpha(self, stack: SDStack, t: int) -> torch.Tensor:
        s = stack.scheduler
        a = s.alphas_cumprod[t] if t >= 0 else s.final_alpha_cumprod
        return a.to(device=self.device, dtype=torch.float32)

    def _to_eps(self, stack: SDStack, out: torch.Tensor, z: torch.Tensor, a: torch.Tensor):
        if stack.scheduler.config.prediction_type == "v_prediction":
            return (a.sqrt() * out.float() + (1 - a).sqrt() * z.float()).to(z.dtype)
        return out

    @staticmethod
    def _ddim(z: torch.Tensor, eps: torch.Tensor, a_from: torch.Tensor, a_to: torch.Tensor):
        """Deterministic DDIM move of z from noise level a_from to a_to (Eq. 2 either way)."""
        zf, ef = z.float(), eps.float()
        x0 = (zf - (1 - a_from).sqrt() * ef) / a_from.sqrt()
        return (a_to.sqrt() * x0 + (1 - a_to).sqrt() * ef).to(z.dtype)

    def _model(self, stack: SDStack, controlnet, z: torch.Tensor, t: int, emb: torch.Tensor,
               control: torch.Tensor | None, extra: torch.Tensor | None = None) -> torch.Tensor:
        """The UNet's raw output, with the ControlNet's residuals when one is given."""
        kwargs = {}
        if controlnet is not None and control is not None:
            cin = z if controlnet.config.in_channels == z.shape[1] or extra is None \
                else torch.cat([z, extra], 1)
            down, mid = controlnet(cin, t, encoder_hidden_states=emb,
                                   controlnet_cond=control.expand(z.shape[0], -1, -1, -1),
                                   conditioning_scale=self.options.controlnet_scale,
                                   return_dict=False)
            kwargs = {"down_block_additional_residuals": down,
                      "mid_block_additional_residual": mid}
        x = z if extra is None else torch.cat([z, extra], 1)
        return stack.unet(x, t, encoder_hidden_states=emb, return_dict=False, **kwargs)[0]

    def _encode(self, stack: SDStack, image: np.ndarray) -> torch.Tensor:
        x = imaging.to_model(image, self.device, self.dtype)
        with torch.no_grad():
            return stack.vae.encode(x).latent_dist.mean * stack.scaling

    def _decode(self, stack: SDStack, z: torch.Tensor) -> np.ndarray:
        with torch.no_grad():
            return imaging.from_model(stack.vae.decode(z / stack.scaling).sample)

    # ---------------------------------------------------------------- appearance
    def appearance(self, sample: Sample, value: str, prompt_src: str, prompt_edit: str,
                   rng: np.random.Generator | None) -> EditedSample:
        """Edit `sample` so it shows `prompt_edit` inside `sample.mask` (all True: image level)."""
        return self._appearance(sample, value, prompt_src, prompt_edit, rng, energy=True)

    def recon(self, sample: Sample, rng: np.random.Generator | None) -> EditedSample:
        """The "Recon" reference: the same pipeline with the source prompt and no edit."""
        prompt = sample.prompt or (f"a photo of a {sample.class_name}" if sample.class_name
                                   else "a photo")
        whole = dataclasses.replace(sample, mask=np.ones(sample.label.shape, bool))
        return self._appearance(whole, "recon", prompt, prompt, rng, energy=False)

    def _appearance(self, sample: Sample, value: str, prompt_src: str, prompt_edit: str,
                    rng, energy: bool) -> EditedSample:
        o = self.options
        stack = self._sd()
        controlnet = self._controlnet()
        ctl = stack.controller
        seed = self._torch_seed(rng)
        image, mask = _check_sample(sample)
        if not mask.any():
            raise DataError(f"{sample.name}: the object mask is empty; nothing to edit")
        height, width = image.shape[:2]
        size = imaging.work_size(height, width, o.resolution, max(8, stack.vae_factor))

        z0 = self._encode(stack, imaging.resize_rgb(image, size))
        lat = tuple(z0.shape[-2:])
        local = not mask.all()
        m = imaging.latent_mask(mask, lat, self.device).to(z0.dtype)
        mask_full = torch.from_numpy(mask.astype(np.float32))[None, None].to(self.device)
        control = None
        if controlnet is not None:
            control = imaging.control_tensor(sample.label, self.palette, sample.ignore_index,
                                             size, self.device, self.dtype)
        emb_src = self._embed(stack, [prompt_src])
        emb_edit = self._embed(stack, [prompt_edit])
        cfg = o.guidance > 1.0
        emb_null = self._embed(stack, [o.negative_prompt]) if cfg else None
        edit_tok, all_tok, tok_rule = self._edit_tokens(
            stack, prompt_src, prompt_edit, [value, sample.class_name])
        use_energy = energy and local and o.eta > 0 and o.energy_iters > 0

        sched = stack.scheduler
        sched.set_timesteps(o.steps)
        ts = [int(t) for t in sched.timesteps]
        n = len(ts)
        prev = [*ts[1:], -1]

        ctl.reset()
        # DDIM inversion (source prompt, no CFG): z_t for every t of the schedule.
        inv: dict[int, torch.Tensor] = {-1: z0}
        z, a_from = z0, self._alpha(stack, -1)
        with torch.no_grad():
            for t in reversed(ts):
                a_t = self._alpha(stack, t)
                out = self._model(stack, controlnet, z, t, emb_src, control)
                z = self._ddim(z, self._to_eps(stack, out, z, a_from), a_from, a_t)
                inv[t], a_from = z, a_t

        trace = Trace(mask=m.clone()) if self.record else None
        energies: list[float] = []
        z_edit = inv[ts[0]].clone()
        n_feat = int(n * o.feature_injection)
        n_attn = int(n * o.attention_injection)
        n_energy = int(np.ceil(n * o.energy_until)) if use_energy else 0
        for i, t in enumerate(ts):
            a_t, a_prev = self._alpha(stack, t), self._alpha(stack, prev[i])
            if i < n_energy:
                z_edit, before, after = self._energy_step(
                    stack, controlnet, ctl, z_edit, t, emb_edit, control, mask_full, edit_tok,
                    all_tok, lat)
                energies.append(before)
                if trace is not None:
                    trace.energy.append((before, after))
            src = inv[t]
            batch = [src, z_edit, z_edit] if cfg else [src, z_edit]
            embs = [emb_src, emb_null, emb_edit] if cfg else [emb_src, emb_edit]
            ctl.inject_feat = i < n_feat
            ctl.inject_attn = i < n_attn
            with torch.no_grad():
                out = self._model(stack, controlnet, torch.cat(batch), t, torch.cat(embs),
                                  control)
            ctl.inject_feat = ctl.inject_attn = False
            if cfg:
                out = out[1:2] + o.guidance * (out[2:3] - out[1:2])
            else:
                out = out[1:2]
            z_edit = self._ddim(z_edit, self._to_eps(stack, out, z_edit, a_t), a_t, a_prev)
            src_prev = inv[prev[i]]
            z_edit = m * z_edit + (1 - m) * src_prev  # Eq. 7 (a no-op for image-level edits)
            if trace is not None:
                trace.edit.append(z_edit.detach().clone())
                trace.source.append(src_prev.clone())
        self.last_trace = trace

        out_img = imaging.resize_rgb(self._decode(stack, z_edit), (height, width))
        if o.paste_background and local:
            out_img = np.where(mask[..., None], out_img, image)
        meta = {
            "backend": "gen4seg",
            "method": "recon" if value == "recon" else "mask-guided-diffusion",
            "prompt_src": prompt_src,
            "steps": o.steps,
            "guidance": o.guidance,
            "eta": o.eta if use_energy else 0.0,
            "energy": [energies[0], energies[-1]] if energies else [],
            "edit_tokens": edit_tok,
            "edit_token_rule": tok_rule,
            "controlnet": controlnet is not None,
            "work_size": list(size),
            "seed": seed,
        }
        return EditedSample(image=out_img, label=sample.label.copy(), mask=sample.mask.copy(),
                            value=value, prompt=prompt_edit, metadata=meta)

    def _energy_step(self, stack, controlnet, ctl, z, t, emb, control, mask_full, edit_tok,
                     all_tok, lat) -> tuple[torch.Tensor, float, float]:
        """Eq. 6 repeated while the energy is above the threshold: z <- z - eta * grad L."""
        o = self.options

        def energy_at(x: torch.Tensor, grad: bool):
            ctl.maps = []
            ctl.store = True
            try:
                with torch.set_grad_enabled(grad):
                    self._model(stack, controlnet, x, t, emb, control)
                    value = attention.mask_energy(ctl.maps, mask_full, edit_tok, all_tok, lat,
                                                  o.energy_form)
            finally:
                ctl.store = False
                ctl.maps = []
            return value

        first = None
        for _ in range(o.energy_iters):
            x = z.detach().requires_grad_(True)
            value = energy_at(x, True)
            now = float(value.detach())
            first = now if first is None else first
            if now <= o.energy_threshold:
                break
            (grad,) = torch.autograd.grad(value, x)
            z = (x - o.eta * grad.to(x.dtype)).detach()
        z = z.detach()
        after = float(energy_at(z, False)) if self.record else float("nan")
        return z, float(first), after

    # ---------------------------------------------------------------- geometry
    def geometry(self, sample: Sample, moved: EditedSample,
                 rng: np.random.Generator | None) -> EditedSample:
        """Repaint what the moved object uncovered (M - M∩M*); label and mask are `moved`'s."""
        o = self.options
        stack = self._inpaint()
        controlnet = self._inpaint_controlnet()
        seed = self._torch_seed(rng)
        image, mask = _check_sample(sample)
        moved_img = np.asarray(moved.image)
        if moved_img.shape != image.shape or moved.label.shape != sample.label.shape \
                or moved.mask.shape != mask.shape:
            raise DataError(
                f"{sample.name}: the moved image/label/mask ({moved_img.shape}, "
                f"{moved.label.shape}, {moved.mask.shape}) do not match the sample's "
                f"({image.shape}, {sample.label.shape}, {mask.shape})")
        repaint = getattr(moved, "repaint", None)  # the caller's M - M∩M*, when it gives one
        uncovered = mask & ~moved.mask.astype(bool) if repaint is None \
            else np.asarray(repaint).astype(bool)
        if uncovered.shape != mask.shape:
            raise DataError(f"{sample.name}: the repaint mask {uncovered.shape} does not match "
                            f"the image {mask.shape}")
        soft = imaging.soft_inpaint_mask(uncovered, 5, 3)
        prompt = str(moved.metadata.get("background_prompt") or o.background_prompt or "")
        meta = {**moved.metadata, "inpaint": {
            "backend": "gen4seg", "prompt": prompt, "steps": o.steps, "guidance": o.guidance,
            "controlnet": controlnet is not None, "seed": seed,
            "repainted_pixels": int((soft > 0).sum()), "composite": "soft-mask"}}
        if not uncovered.any():
            return _result(moved_img.copy(), moved, prompt, meta)

        height, width = image.shape[:2]
        size = imaging.work_size(height, width, o.resolution, max(8, stack.vae_factor))
        soft_t = torch.from_numpy(soft)[None, None]
        hole = (torch.nn.functional.interpolate(soft_t, size=size, mode="area") > 0).float()
        x = imaging.to_model(imaging.resize_rgb(moved_img, size), self.device, self.dtype)
        hole = hole.to(device=self.device, dtype=self.dtype)
        with torch.no_grad():
            masked = stack.vae.encode(x * (1 - hole)).latent_dist.mean * stack.scaling
        lat = tuple(masked.shape[-2:])
        hole_lat = (torch.nn.functional.interpolate(hole.float(), size=lat, mode="area") > 0)
        extra = torch.cat([hole_lat.to(masked.dtype), masked], 1)
        control = None
        if controlnet is not None:
            control = imaging.control_tensor(moved.label, self.palette, sample.ignore_index,
                                             size, self.device, self.dtype)
        cfg = o.guidance > 1.0
        emb = self._embed(stack, [o.negative_prompt, prompt] if cfg else [prompt])

        sched = stack.scheduler
        sched.set_timesteps(o.steps)
        ts = [int(t) for t in sched.timesteps]
        prev = [*ts[1:], -1]
        gen = torch.Generator(device="cpu").manual_seed(seed)
        z = torch.randn((1, masked.shape[1], *lat), generator=gen).to(self.device, self.dtype)
        z = z * sched.init_noise_sigma
        with torch.no_grad():
            for i, t in enumerate(ts):
                a_t, a_prev = self._alpha(stack, t), self._alpha(stack, prev[i])
                k = 2 if cfg else 1
                out = self._model(stack, controlnet, z.expand(k, -1, -1, -1), t, emb, control,
                                  extra=extra.expand(k, -1, -1, -1))
                if cfg:
                    out = out[0:1] + o.guidance * (out[1:2] - out[0:1])
                z = self._ddim(z, self._to_eps(stack, out, z, a_t), a_t, a_prev)
        gen_img = imaging.resize_rgb(self._decode(stack, z), (height, width))
        w = soft[..., None]
        out_img = np.clip(np.round(w * gen_img + (1 - w) * moved_img), 0, 255).astype(np.uint8)
        return _result(out_img, moved, prompt, meta)


def _result(image: np.ndarray, moved: EditedSample, prompt: str, meta: dict) -> EditedSample:
    """The geometry result: the new image with `moved`'s label, mask (and repaint area)."""
    out = EditedSample(image=image, label=moved.label.copy(), mask=moved.mask.copy(),
                       value=moved.value, prompt=prompt, metadata=meta)
    if getattr(moved, "repaint", None) is not None and hasattr(out, "repaint"):
        out.repaint = np.asarray(moved.repaint).copy()
    return out


def _check_sample(sample: Sample) -> tuple[np.ndarray, np.ndarray]:
    image = np.asarray(sample.image)
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise DataError(f"{sample.name}: the image must be uint8 [H,W,3], got "
                        f"{image.dtype} {image.shape}")
    mask = np.asarray(sample.mask).astype(bool)
    if mask.shape != image.shape[:2] or sample.label.shape != image.shape[:2]:
        raise DataError(f"{sample.name}: image {image.shape[:2]}, label {sample.label.shape} and "
                        f"mask {mask.shape} differ in size")
    return image, mask

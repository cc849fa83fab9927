"""The denoising side of the Gen4Seg backend, for one loaded SD stack (+ optional ControlNet).

- `invert`: DDIM inversion with the source prompt (no CFG), z_t for every step.
- `pnp_edit`: the editing loop (Sec. III-B3). Every step runs one UNet call on [source,
  edit-uncond, edit-cond] with PnP injection (Eq. 3 features for the first
  `feature_injection` of the steps, Eq. 4 self-attention q/k for the first
  `attention_injection`); for object edits first the mask-guidance energy (Eq. 5) on the
  cross-attention of the edit tokens moves the editing latent by -eta * grad (Eq. 6,
  `energy_step`); after the DDIM step the latent outside the mask is replaced by the source
  latent at the same noise level (Eq. 7, blending). Each of the two can be switched off
  (`EditTargets.energy`, `EditTargets.blending`) for the ablations of Table VIII.
- `inpaint`: the geometry repaint's denoising with an inpainting UNet (9 input channels).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from segtk_diffusion import attention, imaging
from segtk_diffusion.loading import SDStack
from segtk_diffusion.options import DiffusionOptions


@dataclass
class Trace:
    """Per-step internals of the last appearance run, kept only when `backend.record` is set."""

    edit: list[torch.Tensor] = dataclasses.field(default_factory=list)  # after blending
    source: list[torch.Tensor] = dataclasses.field(default_factory=list)  # source, same level
    energy: list[tuple[float, float]] = dataclasses.field(default_factory=list)  # before, after
    mask: torch.Tensor | None = None  # the latent-resolution blend mask


@dataclass
class EditTargets:
    """What the editing loop steers: prompts' embeddings, the ControlNet condition, the blend
    mask at latent (`blend`) and pixel (`mask`) resolution, the edit tokens (Eq. 5), and
    whether the energy guidance (Eqs. 5-6) and the latent blending (Eq. 7) run at all."""

    emb_src: torch.Tensor
    emb_edit: torch.Tensor
    emb_null: torch.Tensor | None  # the unconditional prompt (CFG), None without CFG
    control: torch.Tensor | None
    blend: torch.Tensor
    mask: torch.Tensor
    edit_tokens: list[int]
    all_tokens: list[int]
    energy: bool
    blending: bool = True


class Sampler:
    """DDIM sampling with one SD stack; `controlnet` (or None) adds its residuals."""

    def __init__(self, stack: SDStack, controlnet: Any, options: DiffusionOptions,
                 device: torch.device, dtype: torch.dtype) -> None:
        self.stack, self.controlnet, self.options = stack, controlnet, options
        self.device, self.dtype = device, dtype

    # ---------------------------------------------------------------- pieces
    def embed(self, prompts: list[str]) -> torch.Tensor:
        tok = self.stack.tokenizer
        ids = tok(prompts, padding="max_length", max_length=tok.model_max_length,
                  truncation=True, return_tensors="pt").input_ids
        with torch.no_grad():
            return self.stack.text_encoder(ids.to(self.device))[0].to(self.dtype)

    def token_ids(self, text: str) -> list[int]:
        tok = self.stack.tokenizer
        return tok(text, padding="max_length", max_length=tok.model_max_length,
                   truncation=True).input_ids

    def edit_tokens(self, prompt_src: str, prompt_edit: str,
                    phrases: list[str]) -> tuple[list[int], list[int], str]:
        """Positions of the intent edit tokens S' in the edit prompt, and of all its tokens S*.

        S' = the tokens of the attribute value and of the class name where they occur in the
        edit prompt; else the tokens that the source prompt lacks; else every prompt token.
        """
        tok = self.stack.tokenizer
        ids = self.token_ids(prompt_edit)
        eos = tok.eos_token_id
        end = ids.index(eos, 1) if eos in ids[1:] else len(ids)
        words = list(range(1, end))
        found: list[int] = []
        for text in phrases:
            sub = tok(text, add_special_tokens=False).input_ids if text.strip() else []
            for i in range(1, end - len(sub) + 1) if sub else ():
                if ids[i:i + len(sub)] == sub:
                    found.extend(range(i, i + len(sub)))
        if found:
            return sorted(set(found)), words, "value/class tokens"
        src = set(self.token_ids(prompt_src))
        diff = [i for i in words if ids[i] not in src]
        if diff:
            return diff, words, "tokens not in the source prompt"
        return words, words, "all prompt tokens"

    def alpha(self, t: int) -> torch.Tensor:
        s = self.stack.scheduler
        a = s.alphas_cumprod[t] if t >= 0 else s.final_alpha_cumprod
        return a.to(device=self.device, dtype=torch.float32)

    def to_eps(self, out: torch.Tensor, z: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        if self.stack.scheduler.config.prediction_type == "v_prediction":
            return (a.sqrt() * out.float() + (1 - a).sqrt() * z.float()).to(z.dtype)
        return out

    @staticmethod
    def ddim(z: torch.Tensor, eps: torch.Tensor, a_from: torch.Tensor,
             a_to: torch.Tensor) -> torch.Tensor:
        """Deterministic DDIM move of z from noise level a_from to a_to (Eq. 2 either way)."""
        zf, ef = z.float(), eps.float()
        x0 = (zf - (1 - a_from).sqrt() * ef) / a_from.sqrt()
        return (a_to.sqrt() * x0 + (1 - a_to).sqrt() * ef).to(z.dtype)

    def model(self, z: torch.Tensor, t: int, emb: torch.Tensor, control: torch.Tensor | None,
              extra: torch.Tensor | None = None) -> torch.Tensor:
        """The UNet's raw output, with the ControlNet's residuals when one is given."""
        kwargs = {}
        net = self.controlnet
        if net is not None and control is not None:
            cin = z if net.config.in_channels == z.shape[1] or extra is None \
                else torch.cat([z, extra], 1)
            down, mid = net(cin, t, encoder_hidden_states=emb,
                            controlnet_cond=control.expand(z.shape[0], -1, -1, -1),
                            conditioning_scale=self.options.controlnet_scale, return_dict=False)
            kwargs = {"down_block_additional_residuals": down,
                      "mid_block_additional_residual": mid}
        x = z if extra is None else torch.cat([z, extra], 1)
        return self.stack.unet(x, t, encoder_hidden_states=emb, return_dict=False, **kwargs)[0]

    def encode(self, image: np.ndarray) -> torch.Tensor:
        x = imaging.to_model(image, self.device, self.dtype)
        with torch.no_grad():
            return self.stack.vae.encode(x).latent_dist.mean * self.stack.scaling

    def decode(self, z: torch.Tensor) -> np.ndarray:
        with torch.no_grad():
            return imaging.from_model(self.stack.vae.decode(z / self.stack.scaling).sample)

    def schedule(self) -> tuple[list[int], list[int]]:
        """The DDIM timesteps (noisiest first) and each one's next (-1 = clean)."""
        sched = self.stack.scheduler
        sched.set_timesteps(self.options.steps)
        ts = [int(t) for t in sched.timesteps]
        return ts, [*ts[1:], -1]

    # ---------------------------------------------------------------- appearance
    def invert(self, z0: torch.Tensor, emb: torch.Tensor, control: torch.Tensor | None,
               ts: list[int]) -> dict[int, torch.Tensor]:
        """DDIM inversion (source prompt, no CFG): z_t for every t of the schedule (-1: z0)."""
        inv: dict[int, torch.Tensor] = {-1: z0}
        z, a_from = z0, self.alpha(-1)
        with torch.no_grad():
            for t in reversed(ts):
                a_t = self.alpha(t)
                out = self.model(z, t, emb, control)
                z = self.ddim(z, self.to_eps(out, z, a_from), a_from, a_t)
                inv[t], a_from = z, a_t
        return inv

    def pnp_edit(self, inv: dict[int, torch.Tensor], ts: list[int], prev: list[int],
                 targets: EditTargets, trace: Trace | None) -> tuple[torch.Tensor, list[float]]:
        """The editing branch from the inverted z_T: (final latent, energy before each step's
        guidance)."""
        o = self.options
        ctl = self.stack.controller
        n = len(ts)
        cfg = targets.emb_null is not None
        lat = (int(inv[-1].shape[-2]), int(inv[-1].shape[-1]))
        energies: list[float] = []
        z_edit = inv[ts[0]].clone()
        n_feat = int(n * o.feature_injection)
        n_attn = int(n * o.attention_injection)
        n_energy = int(np.ceil(n * o.energy_until)) if targets.energy else 0
        m = targets.blend
        for i, t in enumerate(ts):
            a_t, a_prev = self.alpha(t), self.alpha(prev[i])
            if i < n_energy:
                z_edit, before, after = self.energy_step(z_edit, t, targets, lat, trace is not None)
                energies.append(before)
                if trace is not None:
                    trace.energy.append((before, after))
            src = inv[t]
            batch = [src, z_edit, z_edit] if cfg else [src, z_edit]
            emb_null = targets.emb_null
            assert emb_null is not None or not cfg  # guidance runs only with a null embedding
            embs = [targets.emb_src, emb_null, targets.emb_edit] if cfg and emb_null is not None \
                else [targets.emb_src, targets.emb_edit]
            ctl.inject_feat = i < n_feat
            ctl.inject_attn = i < n_attn
            with torch.no_grad():
                out = self.model(torch.cat(batch), t, torch.cat(embs), targets.control)
            ctl.inject_feat = ctl.inject_attn = False
            if cfg:
                out = out[1:2] + o.guidance * (out[2:3] - out[1:2])
            else:
                out = out[1:2]
            z_edit = self.ddim(z_edit, self.to_eps(out, z_edit, a_t), a_t, a_prev)
            src_prev = inv[prev[i]]
            if targets.blending:
                z_edit = m * z_edit + (1 - m) * src_prev  # Eq. 7 (a no-op for image-level edits)
            if trace is not None:
                trace.edit.append(z_edit.detach().clone())
                trace.source.append(src_prev.clone())
        return z_edit, energies

    def energy_step(self, z: torch.Tensor, t: int, targets: EditTargets, lat: tuple[int, int],
                    record: bool) -> tuple[torch.Tensor, float, float]:
        """Eq. 6 repeated while the energy is above the threshold: z <- z - eta * grad L.
        Returns (z, energy before, energy after: NaN unless `record`)."""
        o = self.options
        ctl = self.stack.controller

        def energy_at(x: torch.Tensor, grad: bool) -> torch.Tensor:
            ctl.maps = []
            ctl.store = True
            try:
                with torch.set_grad_enabled(grad):
                    self.model(x, t, targets.emb_edit, targets.control)
                    value = attention.mask_energy(ctl.maps, targets.mask, targets.edit_tokens,
                                                  targets.all_tokens, lat, o.energy_form)
            finally:
                ctl.store = False
                ctl.maps = []
            return value

        first: float | None = None
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
        after = float(energy_at(z, False)) if record else float("nan")
        return z, float("nan") if first is None else first, after

    # ---------------------------------------------------------------- geometry
    def inpaint(self, extra: torch.Tensor, emb: torch.Tensor, control: torch.Tensor | None,
                seed: int) -> torch.Tensor:
        """Denoise from seeded noise with the inpainting UNet; `extra` = [hole mask, masked
        image latent] (the UNet's 5 extra input channels). CFG when `emb` holds 2 prompts."""
        o = self.options
        ts, prev = self.schedule()
        gen = torch.Generator(device="cpu").manual_seed(seed)
        shape = (1, extra.shape[1] - 1, *extra.shape[-2:])
        z = torch.randn(shape, generator=gen).to(self.device, self.dtype)
        z = z * self.stack.scheduler.init_noise_sigma
        k = emb.shape[0]
        with torch.no_grad():
            for i, t in enumerate(ts):
                a_t, a_prev = self.alpha(t), self.alpha(prev[i])
                out = self.model(z.expand(k, -1, -1, -1), t, emb, control,
                                 extra=extra.expand(k, -1, -1, -1))
                if k == 2:
                    out = out[0:1] + o.guidance * (out[1:2] - out[0:1])
                z = self.ddim(z, self.to_eps(out, z, a_t), a_t, a_prev)
        return z

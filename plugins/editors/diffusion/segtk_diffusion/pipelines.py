"""The Gen4Seg editing backend: loading, and the appearance / geometry / recon entry points.

Appearance (Sec. III-B3): DDIM inversion of the real image with the source prompt gives the
source trajectory z_t; the editing branch starts from the same z_T and is steered by PnP
injection, mask-guidance energy and latent blending (`sampler.Sampler.pnp_edit`), optionally
with a seg ControlNet on the colourised label.

Geometry (Sec. III-C): the caller's rigid transform `moved`, then an SD inpainting UNet (with a
seg ControlNet on the moved label when given) repaints the uncovered area M - M∩M* under a 5×5
dilated, 3×3 smoothed soft mask, composited over `moved` with that soft mask.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from segtk.core import DataError, EditBackend, EditedSample, ModelError, Sample
from segtk_diffusion import attention, imaging
from segtk_diffusion.loading import (
    SDStack,
    check_pair,
    load_controlnet,
    load_stack,
    missing_option,
)
from segtk_diffusion.options import DTYPES, DiffusionOptions
from segtk_diffusion.sampler import EditTargets, Sampler, Trace

REQUIRES = ("diffusers", "transformers")
INSTALL = (
    "pip install 'diffusers==0.39.0' 'transformers==4.57.6' && "
    "pip install -e plugins/editors/diffusion"
)

_STACKS: dict[tuple, Any] = {}  # loaded weights, shared by backends with the same paths


def clear_cache() -> None:
    _STACKS.clear()


class Gen4SegBackend(EditBackend):
    """The `diffusion` edit backend: `appearance`, `geometry` and `recon` (its reference).

    `Gen4SegBackend(options)` with a dict of `DiffusionOptions` fields, its `Params` (`--param`
    strings are read as their types; a key it does not declare is refused). Weights load lazily, from local folders or the Hugging Face cache
    only; a method whose weights were not given raises a ModelError naming the option. Without
    a seg ControlNet the edits are not tied to the label map the benchmark reuses, so the
    backend refuses to run without one unless `allow_no_controlnet` is set (ablations).
    """

    name = "diffusion"
    requires = REQUIRES
    install = INSTALL
    description = "Gen4Seg mask-guided diffusion editing and inpainting (diffusers, SD 2.1)"
    reference = "recon"
    Params = DiffusionOptions

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        self.options = o = DiffusionOptions.from_dict(dict(options or {}))
        if not (o.controlnet or o.inpaint_controlnet or o.allow_no_controlnet):
            raise no_controlnet("the diffusion backend")
        self.device = torch.device(o.device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.dtype = DTYPES[o.dtype]
        self.palette = imaging.load_palette(o.palette)
        self.record = False
        self.last_trace: Trace | None = None

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

    def _cached(self, key: tuple, load: Callable[[], Any]) -> Any:
        key = (*key, str(self.device), str(self.dtype))
        if key not in _STACKS:
            _STACKS[key] = load()
        return _STACKS[key]

    def _sd(self) -> SDStack:
        if not self.options.sd:
            raise missing_option("sd", "diffusion appearance editing and recon")

        def load() -> SDStack:
            stack = load_stack(self.options.sd, "sd", self.device, self.dtype)
            stack.controller = attention.install(stack.unet)
            return stack

        return self._cached(("sd", self.options.sd), load)

    def _controlnet(self) -> Any:
        if not self.options.controlnet:
            if self.options.allow_no_controlnet:
                return None
            raise no_controlnet("diffusion appearance editing and recon (`controlnet`)")
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

    def _inpaint_controlnet(self) -> Any:
        o = self.options
        path, option = (o.inpaint_controlnet, "inpaint_controlnet") if o.inpaint_controlnet \
            else (o.controlnet, "controlnet")
        if not path:
            if o.allow_no_controlnet:
                return None
            raise no_controlnet("diffusion geometry editing (`inpaint_controlnet`)")
        net = self._cached(("controlnet", path), lambda: load_controlnet(
            path, option, self.device, self.dtype))
        check_pair(net, self._inpaint().unet, option, "inpaint")
        return net

    def _torch_seed(self, rng: np.random.Generator | None) -> int:
        if rng is None:
            return self.options.seed
        return int(rng.integers(0, 2**31 - 1))

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
                    rng: np.random.Generator | None, energy: bool) -> EditedSample:
        o = self.options
        sampler = Sampler(self._sd(), self._controlnet(), o, self.device, self.dtype)
        seed = self._torch_seed(rng)
        image, mask = _check_sample(sample)
        if not mask.any():
            raise DataError(f"{sample.name}: the object mask is empty; nothing to edit")
        height, width = image.shape[:2]
        size = imaging.work_size(height, width, o.resolution, max(8, sampler.stack.vae_factor))

        z0 = sampler.encode(imaging.resize_rgb(image, size))
        local = not mask.all()
        control = None
        if sampler.controlnet is not None:
            control = imaging.control_tensor(sample.label, self.palette, sample.ignore_index,
                                             size, self.device, self.dtype)
        edit_tok, all_tok, tok_rule = sampler.edit_tokens(
            prompt_src, prompt_edit, [value, sample.class_name])
        targets = EditTargets(
            emb_src=sampler.embed([prompt_src]), emb_edit=sampler.embed([prompt_edit]),
            emb_null=sampler.embed([o.negative_prompt]) if o.guidance > 1.0 else None,
            control=control,
            blend=imaging.latent_mask(mask, (int(z0.shape[-2]), int(z0.shape[-1])), self.device).to(z0.dtype),
            mask=torch.from_numpy(mask.astype(np.float32))[None, None].to(self.device),
            edit_tokens=edit_tok, all_tokens=all_tok,
            energy=energy and o.energy and local and o.eta > 0 and o.energy_iters > 0,
            blending=o.blend and local)

        ts, prev = sampler.schedule()
        sampler.stack.controller.reset()
        inv = sampler.invert(z0, targets.emb_src, control, ts)
        trace = Trace(mask=targets.blend.clone()) if self.record else None
        z_edit, energies = sampler.pnp_edit(inv, ts, prev, targets, trace)
        self.last_trace = trace

        out_img = imaging.resize_rgb(sampler.decode(z_edit), (height, width))
        if o.paste_background and local:
            out_img = np.where(mask[..., None], out_img, image)
        meta = {
            "backend": "gen4seg",
            "method": "recon" if value == "recon" else "mask-guided-diffusion",
            "prompt_src": prompt_src,
            "steps": o.steps,
            "guidance": o.guidance,
            "energy": targets.energy,  # Eqs. 5-6 applied to this edit (object edits only)
            "blend": targets.blending,  # Eq. 7 applied (a no-op, so False, for image-level edits)
            "eta": o.eta if targets.energy else 0.0,
            "energy_values": [energies[0], energies[-1]] if energies else [],
            "edit_tokens": edit_tok,
            "edit_token_rule": tok_rule,
            "controlnet": sampler.controlnet is not None,
            "work_size": list(size),
            "seed": seed,
        }
        return EditedSample(image=out_img, label=sample.label.copy(), mask=sample.mask.copy(),
                            value=value, prompt=prompt_edit, metadata=meta)

    # ---------------------------------------------------------------- geometry
    def geometry(self, sample: Sample, moved: EditedSample,
                 rng: np.random.Generator | None) -> EditedSample:
        """Repaint what the moved object uncovered (M - M∩M*); label and mask are `moved`'s."""
        o = self.options
        sampler = Sampler(self._inpaint(), self._inpaint_controlnet(), o, self.device,
                          self.dtype)
        seed = self._torch_seed(rng)
        image, mask = _check_sample(sample)
        moved_img = np.asarray(moved.image)
        if moved_img.shape != image.shape or moved.label.shape != sample.label.shape \
                or moved.mask.shape != mask.shape:
            raise DataError(
                f"{sample.name}: the moved image/label/mask ({moved_img.shape}, "
                f"{moved.label.shape}, {moved.mask.shape}) do not match the sample's "
                f"({image.shape}, {sample.label.shape}, {mask.shape})")
        # the caller's M - M∩M*, when it gives one
        uncovered = mask & ~moved.mask.astype(bool) if moved.repaint is None \
            else np.asarray(moved.repaint).astype(bool)
        if uncovered.shape != mask.shape:
            raise DataError(f"{sample.name}: the repaint mask {uncovered.shape} does not match "
                            f"the image {mask.shape}")
        soft = imaging.soft_inpaint_mask(uncovered, 5, 3)
        prompt = str(moved.metadata.get("background_prompt") or o.background_prompt or "")
        meta = {**moved.metadata, "inpaint": {
            "backend": "gen4seg", "prompt": prompt, "steps": o.steps, "guidance": o.guidance,
            "controlnet": sampler.controlnet is not None, "seed": seed,
            "repainted_pixels": int((soft > 0).sum()), "composite": "soft-mask"}}
        if not uncovered.any():
            return _result(moved_img.copy(), moved, prompt, meta)

        height, width = image.shape[:2]
        size = imaging.work_size(height, width, o.resolution, max(8, sampler.stack.vae_factor))
        soft_t = torch.from_numpy(soft)[None, None]
        hole = (torch.nn.functional.interpolate(soft_t, size=size, mode="area") > 0).float()
        x = imaging.to_model(imaging.resize_rgb(moved_img, size), self.device, self.dtype)
        hole = hole.to(device=self.device, dtype=self.dtype)
        stack = sampler.stack
        with torch.no_grad():
            masked = stack.vae.encode(x * (1 - hole)).latent_dist.mean * stack.scaling
        lat = tuple(masked.shape[-2:])
        hole_lat = (torch.nn.functional.interpolate(hole.float(), size=lat, mode="area") > 0)
        extra = torch.cat([hole_lat.to(masked.dtype), masked], 1)
        control = None
        if sampler.controlnet is not None:
            control = imaging.control_tensor(moved.label, self.palette, sample.ignore_index,
                                             size, self.device, self.dtype)
        cfg = o.guidance > 1.0
        emb = sampler.embed([o.negative_prompt, prompt] if cfg else [prompt])
        z = sampler.inpaint(extra, emb, control, seed)
        gen_img = imaging.resize_rgb(sampler.decode(z), (height, width))
        w = soft[..., None]
        out_img = np.clip(np.round(w * gen_img + (1 - w) * moved_img), 0, 255).astype(np.uint8)
        return _result(out_img, moved, prompt, meta)


def no_controlnet(what: str) -> ModelError:
    """Refusal to edit without a seg ControlNet: the edited image would not be conditioned on
    the label map whose reuse is the point of the benchmark (Gen4Seg Sec. III-B3, III-C)."""
    return ModelError(
        f"{what} has no ControlNet: its edits would not be conditioned on the label map, so the "
        "source labels may not fit them",
        hint="pass --param controlnet=DIR (a segmentation ControlNet of the --sd family); to run "
             "without one on purpose (the ablations of Gen4Seg Tables VIII-IX) pass --param "
             "allow_no_controlnet=true")


def _result(image: np.ndarray, moved: EditedSample, prompt: str, meta: dict) -> EditedSample:
    """The geometry result: the new image with `moved`'s label, mask and repaint area."""
    repaint = None if moved.repaint is None else np.asarray(moved.repaint).copy()
    return EditedSample(image=image, label=moved.label.copy(), mask=moved.mask.copy(),
                        value=moved.value, prompt=prompt, metadata=meta, repaint=repaint)


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

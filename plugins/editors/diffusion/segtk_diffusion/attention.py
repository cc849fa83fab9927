"""PnP injection and cross-attention capture inside a diffusers UNet, and the Eq. 5 energy.

Batch convention while injecting: index 0 is the source (reconstruction) branch, every later
index belongs to the editing branch (its unconditional and conditional halves under CFG).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F


@dataclass
class Controller:
    """What the custom processors and the feature hook do on the next UNet call."""

    inject_attn: bool = False  # Eq. 4: editing branch's self-attention q, k <- source branch's
    inject_feat: bool = False  # Eq. 3: editing branch's residual features <- source branch's
    store: bool = False  # keep cross-attention maps of the energy layers (with autograd)
    maps: list[torch.Tensor] = field(default_factory=list)
    attn_layers: list[str] = field(default_factory=list)
    energy_layers: list[str] = field(default_factory=list)
    feature_layer: str = ""

    def reset(self) -> None:
        self.inject_attn = self.inject_feat = self.store = False
        self.maps = []


class InjectingProcessor:
    """Attention as diffusers computes it, plus q/k injection (self) or map capture (cross)."""

    def __init__(self, ctl: Controller, inject: bool, store: bool) -> None:
        self.ctl, self.inject, self.store = ctl, inject, store

    def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None,
                 temb=None, *args, **kwargs):
        residual = hidden_states
        if attn.spatial_norm is not None:
            hidden_states = attn.spatial_norm(hidden_states, temb)
        input_ndim = hidden_states.ndim
        if input_ndim == 4:
            b4, c4, h4, w4 = hidden_states.shape
            hidden_states = hidden_states.view(b4, c4, h4 * w4).transpose(1, 2)
        is_cross = encoder_hidden_states is not None
        batch, seq, _ = (encoder_hidden_states if is_cross else hidden_states).shape
        attention_mask = attn.prepare_attention_mask(attention_mask, seq, batch)
        if attn.group_norm is not None:
            hidden_states = attn.group_norm(hidden_states.transpose(1, 2)).transpose(1, 2)

        query = attn.to_q(hidden_states)
        context = hidden_states
        if is_cross:
            context = encoder_hidden_states
            if attn.norm_cross:
                context = attn.norm_encoder_hidden_states(context)
        key = attn.to_k(context)
        value = attn.to_v(context)

        if self.inject and not is_cross and self.ctl.inject_attn and query.shape[0] > 1:
            # Eq. 4: the editing branch attends with the source branch's queries and keys, i.e.
            # uses the source's self-attention map on its own values (PnP).
            query = torch.cat([query[:1], query[:1].expand_as(query[1:])])
            key = torch.cat([key[:1], key[:1].expand_as(key[1:])])

        if self.store and is_cross and self.ctl.store:
            q = attn.head_to_batch_dim(query)
            k = attn.head_to_batch_dim(key)
            v = attn.head_to_batch_dim(value)
            probs = attn.get_attention_scores(q, k, attention_mask)  # [B*heads, HW, tokens]
            self.ctl.maps.append(probs)
            out = attn.batch_to_head_dim(torch.bmm(probs, v))
        else:
            heads = attn.heads
            d = query.shape[-1] // heads

            def split(x):
                return x.view(x.shape[0], -1, heads, d).transpose(1, 2)

            if attention_mask is not None:
                attention_mask = attention_mask.view(batch, heads, -1, attention_mask.shape[-1])
            out = F.scaled_dot_product_attention(split(query), split(key), split(value),
                                                 attn_mask=attention_mask)
            out = out.transpose(1, 2).reshape(query.shape[0], -1, heads * d).to(query.dtype)

        out = attn.to_out[0](out)
        out = attn.to_out[1](out)
        if input_ndim == 4:
            out = out.transpose(-1, -2).reshape(b4, c4, h4, w4)
        if attn.residual_connection:
            out = out + residual
        return out / attn.rescale_output_factor


def install(unet) -> Controller:
    """Put the processors and the feature hook in place; returns their shared controller.

    Layers follow PnP / the official Gen4Seg code on SD's UNet, found by structure so any
    diffusers UNet2DConditionModel works: with `k` the first up block that has cross-attention
    (k = 1 in SD), features are injected at `up_blocks[k].resnets[1]` (after its conv2, before
    the skip sum), self-attention q/k in every up-block transformer from `up_blocks[k]
    .attentions[1]` on, and the energy reads the cross-attention maps of the mid block and
    `up_blocks[k]`.
    """
    ctl = Controller()
    ups = unet.up_blocks
    cross = [i for i, b in enumerate(ups) if getattr(b, "has_cross_attention", False)]
    if not cross:
        raise ValueError("this UNet has no cross-attention up block: not a text-to-image UNet")
    k = cross[0]
    procs = {}
    for name in unet.attn_processors:
        parts = name.split(".")
        inject = store = False
        if parts[0] == "up_blocks" and "attentions" in parts:
            blk, att = int(parts[1]), int(parts[3])
            inject = "attn1" in parts and blk >= k and not (blk == k and att == 0)
            store = "attn2" in parts and blk == k
        elif parts[0] == "mid_block":
            store = "attn2" in parts
        procs[name] = InjectingProcessor(ctl, inject, store)
        if inject:
            ctl.attn_layers.append(name)
        if store:
            ctl.energy_layers.append(name)
    unet.set_attn_processor(dict(procs))  # a copy: diffusers pops entries off the dict it gets

    resnets = ups[k].resnets
    idx = 1 if len(resnets) > 1 else 0
    ctl.feature_layer = f"up_blocks.{k}.resnets.{idx}"

    def hook(module, inputs, output):
        if ctl.inject_feat and output.shape[0] > 1:  # Eq. 3
            return torch.cat([output[:1], output[:1].expand_as(output[1:])])
        return output

    resnets[idx].conv2.register_forward_hook(hook)
    return ctl


def _layer_size(hw: int, lat: tuple[int, int]) -> tuple[int, int]:
    """The spatial size of a layer with `hw` positions in a UNet fed latents of size `lat`."""
    h, w = lat
    for _ in range(8):
        if h * w == hw:
            return h, w
        h, w = math.ceil(h / 2), math.ceil(w / 2)  # stride-2 conv, padding 1
    raise ValueError(f"cannot place {hw} attention positions on latents of size {lat}")


def mask_energy(maps: list[torch.Tensor], mask: torch.Tensor, edit_tokens: list[int],
                prompt_tokens: list[int], lat: tuple[int, int], form: str = "ratio"
                ) -> torch.Tensor:
    """Eq. 5, the mask-guidance energy, averaged over the stored layers and heads.

    maps: cross-attention probabilities [heads, HW, tokens] of the conditional edit branch;
    mask: [1,1,H,W] float object mask (any resolution, binarised per layer at 0.5).
    form "ratio" (default; the official code and layout guidance [12]): for the summed map A of
    the edit tokens, L = (1 - sum_in(A) / sum_all(A))^2 — attention inside the mask vs. all of it,
    which both raises it inside and lowers it outside. form "paper": Eq. 5 as printed, the edit
    tokens' share of the prompt tokens' attention at each pixel, averaged over the mask:
    L = (1 - sum(M * sum_j A_j / sum_n A_n) / sum(M))^2.
    """
    losses = []
    for probs in maps:
        h, w = _layer_size(probs.shape[1], lat)
        m = F.interpolate(mask.float(), size=(h, w), mode="area").to(probs.dtype)
        mb = (m >= 0.5).to(probs.dtype)
        if mb.sum() == 0:
            mb = (m > 0).to(probs.dtype)
        mb = mb.reshape(1, -1)
        a = probs[:, :, edit_tokens].float().sum(-1)  # [heads, HW]
        if form == "paper":
            total = probs[:, :, prompt_tokens].float().sum(-1).clamp_min(1e-8)
            inside = (mb * a / total).sum(-1) / mb.sum().clamp_min(1)
        else:
            inside = (mb * a).sum(-1) / a.sum(-1).clamp_min(1e-8)
        losses.append(((1 - inside) ** 2).mean())
    return torch.stack(losses).mean()

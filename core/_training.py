"""The contracts `segtk train` builds on: `Augmenter` (plugin kind "augmenter") and `Trainable`.

Augmenters work on batches, as the training loop sees them: images float32 [B,3,H,W] in [0,1]
and labels int64 [B,H,W] (`ignore_index` never scored). They are

- label-consistent: whatever moves or replaces pixels moves or replaces their labels too (a
  geometric op is applied to both, nearest-neighbour for labels; a pasted patch brings its
  label), and photometric ops leave the label untouched;
- deterministic given the `torch.Generator` they receive: the trainer derives one from the run
  seed, epoch and step, so two runs (or a resumed one) see the same augmented batches.

A spec `NAME[:key=value,...]` names one (`cutmix:alpha=1`, `edits:dir=runs/color`); list
values use `;` (`values=red;blue`). `baseline` (or `none`) means no augmentation.

`Trainable` is what a segmenter adds so `segtk train` can fine-tune it: its parameters, a
train/eval mode (in train mode `logits` keeps the autograd graph and normalisation layers use
batch statistics), its state as tensors, and `save(dir)` writing safetensors and returning a
`--model` spec that loads them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

import torch
from safetensors.torch import save

from segtk.core._data import atomic_write_bytes
from segtk.core._errors import PluginError
from segtk.core._params import Declared

# (uint8 image [H,W,3], int64 label [H,W], generator) -> (image [3,h,w] in [0,1], label [h,w])
Prepare = Callable[[Any, Any, torch.Generator], tuple[torch.Tensor, torch.Tensor]]


@dataclass
class AugmentContext:
    """What an augmenter may need to know about the training data (set once, before training).

    `prepare` is how the trainer turns a dataset item into a training sample (its resize and
    random crop): an augmenter that brings in new samples (e.g. `edits`) uses it, so they have
    the scale and size of the rest of the batch. `data` and `split` are the training data spec
    and split as the trainer loaded them (`data` None: not known, e.g. an augmenter set up by
    hand), so one that brings in samples can refuse those made from another split (test images).
    """

    classes: list[str]
    ignore_index: int = 255
    prepare: Prepare | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    data: str | None = None
    split: str | None = None


def seeds(generator: torch.Generator, n: int) -> list[int]:
    """n integer seeds drawn from `generator`, for libraries with their own random state."""
    return [int(s) for s in torch.randint(0, 2**31 - 1, (n,), generator=generator)]


class Augmenter(ABC):
    """Augments a training batch; label-consistent and deterministic given the generator.

    Subclasses set `name`, `defaults` (their parameters, with types) and implement `apply`.
    Parameters arrive as strings from a spec and are read as the type of their default.
    """

    name: ClassVar[str] = "augmenter"
    description: ClassVar[str] = ""
    defaults: ClassVar[dict[str, Any]] = {}
    requires: ClassVar[tuple[str, ...]] = ()
    install: ClassVar[str] = ""

    def __init__(self, **params: Any) -> None:
        given = Declared.of_defaults(self.defaults).read(params, "augmenter", self.name)
        self.params = {**self.defaults, **given}
        self.context = AugmentContext([])

    def setup(self, context: AugmentContext) -> None:
        """Called once before training with the dataset's classes and ignore index."""
        self.context = context

    def parameters(self) -> dict[str, Any]:
        """What run.json records about this augmenter."""
        return dict(self.params)

    def drawn(self) -> dict[str, Any]:
        """What `apply` drew since the last call (counts, shares), which the trainer records
        with each epoch in results.jsonl so a run shows what it trained on; {} (the default)
        records nothing. Each call starts a new count."""
        return {}

    def consistency(self) -> float:
        """The weight of a Jensen–Shannon consistency loss (AugMix's JSD); 0, the default:
        none, the model trains on the augmented batch. With a weight, the trainer asks `apply`
        for two views of each clean batch, which must keep its labels, and trains on the clean
        batch's cross-entropy plus the weight times the JSD of the three predictions."""
        return 0.0

    @abstractmethod
    def apply(self, images: torch.Tensor, labels: torch.Tensor,
              generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """The augmented batch (same shapes); must draw randomness from `generator` only."""

    def __call__(self, images: torch.Tensor, labels: torch.Tensor,
                 generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """`apply`, with its output checked: a broken augmenter must not train on garbage."""
        if images.dim() != 4 or images.shape[1] != 3 or labels.shape != (
                images.shape[0], *images.shape[2:]):
            raise ValueError(f"augmenter {self.name}: expected images [B,3,H,W] and labels "
                             f"[B,H,W], got {tuple(images.shape)} and {tuple(labels.shape)}")
        out_images, out_labels = self.apply(images, labels, generator)
        if out_images.shape != images.shape or out_labels.shape != labels.shape:
            raise PluginError(f"augmenter {self.name} changed the batch shape "
                              f"{tuple(images.shape)} -> {tuple(out_images.shape)}")
        if out_labels.dtype != torch.long:
            raise PluginError(f"augmenter {self.name} returned {out_labels.dtype} labels, "
                              "expected int64")
        return out_images.clamp(0, 1).to(torch.float32), out_labels


# --- trainable segmenters ---------------------------------------------------------------------


@runtime_checkable
class Trainable(Protocol):
    """A segmenter `segtk train` can fine-tune. Mixed into a `Segmenter` subclass.

    In train mode `logits(images)` returns differentiable scores [B, outputs, H, W] at the input
    size (the same preprocessing as `predict`) and normalisation/dropout layers train; in eval
    mode everything is as before (inference mode, no graph). A Protocol, so the trainer's
    `model.logits(...)` is typed; a model subclasses it (`class M(Segmenter, Trainable)`) to
    inherit `eval` and be checked by mypy against it.
    """

    training: bool = False

    @abstractmethod
    def logits(self, images: torch.Tensor) -> torch.Tensor:
        """Scores [B, outputs, H, W] at the input size: the Segmenter's own `logits`, which must
        come first in the bases (abstract here, so the other order fails to instantiate)."""

    @abstractmethod
    def parameters(self) -> Iterator[torch.nn.Parameter]:
        """The tensors the optimiser updates."""

    @abstractmethod
    def train(self, mode: bool = True) -> Trainable:
        """Switch to train mode (or back to eval with mode=False); returns self."""

    def eval(self) -> Trainable:
        return self.train(False)

    @abstractmethod
    def state_dict(self) -> dict[str, torch.Tensor]:
        """Every tensor that defines the model (parameters and buffers), for checkpoints."""

    @abstractmethod
    def load_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        """Restore a `state_dict()` exactly (strict)."""

    @abstractmethod
    def save(self, directory: str | Path) -> str:
        """Write the model into `directory` as safetensors; return a `--model` spec loading it."""


class ModuleTrainable(Trainable):
    """A Trainable whose weights are one torch module (`trainable_module`): parameters, mode and
    state come from it, so a model plugin writes only `save` (and any extra mode rule)."""

    @property
    @abstractmethod
    def trainable_module(self) -> torch.nn.Module:
        """The network `segtk train` updates."""

    def parameters(self) -> Iterator[torch.nn.Parameter]:
        return self.trainable_module.parameters()

    def train(self, mode: bool = True) -> Trainable:
        self.training = mode
        self.trainable_module.train(mode)
        return self

    def state_dict(self) -> dict[str, torch.Tensor]:
        return dict(self.trainable_module.state_dict())

    def load_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        self.trainable_module.load_state_dict(dict(state), strict=True)


def save_safetensors(path: str | Path, state: Mapping[str, torch.Tensor],
                     metadata: dict[str, str] | None = None) -> None:
    """Tensors to a .safetensors file, atomically (a crash never leaves half a checkpoint)."""
    tensors = {k: v.detach().to("cpu").contiguous().clone() for k, v in state.items()}
    atomic_write_bytes(path, save(tensors, metadata=metadata))

"""The editing contracts (Gen4Seg attribute editing): new images whose labels stay valid.

Three plugin kinds meet here:

- `Editor` (hook `register_editors`): `edit(sample, value, rng) -> EditedSample`. It declares
  its `values`, its `prompt_templates` (the edit prompts P*) and its `kind`, the robustness
  group `segtk bench edits` reports it in (mR over "appearance" or "geometry" subsets).
  Guarantees: an appearance edit returns the sample's label and mask unchanged; a geometry
  edit moves image, mask and label together and labels the area the object uncovered.
- `EditBackend` (hook `register_edit_backends`): another way to carry out an editor's edit
  (`segtk edit --backend NAME`), e.g. the diffusion backend of segtk-diffusion.
- `PromptWriter` (hook `register_prompt_writers`): writes the edit prompts instead of the
  editors' templates (`segtk edit --prompt-writer NAME --prompt-model MODEL`).

The shared machinery of the bundled editors (backends, value checks, the rigid geometry
transform, repainting) is the editing kit, `segtk.editkit`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np

from segtk.core._errors import PluginError
from segtk.core._params import declared

EDIT_KINDS = ("appearance", "geometry")
# The prompt of a value no template covers (`Editor.prompt_templates`).
DEFAULT_TEMPLATE = "{caption}, {attribute}: {value}"


@dataclass
class Sample:
    """One labelled image prepared for editing.

    image: uint8 RGB [H,W,3]; label: int64 [H,W]; mask: bool [H,W] of the edited object
    (all True for image-level edits); class_name: the object's class; prompt: a caption.
    """

    name: str
    image: np.ndarray
    label: np.ndarray
    mask: np.ndarray
    classes: list[str]
    class_name: str = ""
    prompt: str = ""
    ignore_index: int = 255


@dataclass
class EditedSample:
    """An edited image with its label and mask, transformed together with the image.

    `repaint` (geometry edits): bool [H,W], the area the object uncovered, which a backend
    repaints (None otherwise). `metadata` must stay JSON-serialisable (it goes to the manifest).
    `prompt_writer`: who wrote `prompt` when a PromptWriter was asked (its source, e.g.
    "lm:PATH", or "template" where it fell back to the template); "" otherwise.
    """

    image: np.ndarray
    label: np.ndarray
    mask: np.ndarray
    value: str
    prompt: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    repaint: np.ndarray | None = None
    prompt_writer: str = ""


class SkipSample(Exception):
    """Raised by an editor for a sample it cannot edit; the edit job counts `reason`."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


# --- prompts ----------------------------------------------------------------------------------


def article(word: str) -> str:
    """The article before `word`: "a" or "an"."""
    return "an" if word[:1].lower() in "aeiou" else "a"


def phrase(name: str) -> str:
    """A class name as words ("traffic_light" -> "traffic light")."""
    return name.replace("_", " ").strip()


def caption(class_name: str) -> str:
    """'a photo of a car': the source caption of an object edit."""
    cls = phrase(class_name)
    return f"a photo of {article(cls)} {cls}"


class PromptWriter(ABC):
    """Writes edit prompts in place of the editors' templates (a language model, say).

    Registered as a class through `register_prompt_writers`; `segtk edit --prompt-writer NAME
    --prompt-model MODEL` builds it as `cls(model=MODEL)` (`segtk.core.build`: other
    parameters are the constructor's, with defaults) and hands it to the editor.
    """

    name: ClassVar[str] = "prompt-writer"
    requires: ClassVar[tuple[str, ...]] = ()
    install: ClassVar[str] = ""
    description: ClassVar[str] = ""

    def __init__(self, model: str) -> None:
        """`model`: what `--prompt-model` names (for `lm`, a local model folder)."""
        self.model = model

    @abstractmethod
    def rewrite(self, sample: Sample, attribute: str, value: str,
                template: str) -> tuple[str, str]:
        """(prompt, source): the edit prompt for `attribute` = `value` on `sample`, and who
        wrote it ("template" where the writer fell back to `template`, the editor's prompt)."""


# --- editors ----------------------------------------------------------------------------------


class Editor(ABC):
    """Edits one attribute of a sample. Appearance edits keep the label; geometry edits move it.

    `levels`: False (appearance) if the values are alternatives, e.g. colours: `segtk bench
    edits` edits one value drawn per image into the attribute's subset (Gen4Seg draws one of
    the LLM's candidate prompts per image); True (geometry) if they are strengths, e.g. Size
    0.2 and 0.4: each value is its own subset, as in Gen4Seg's Table III.

    `prompt_templates` maps a value (or "*", any value) to its edit prompt, a str.format
    template with {value}, {a_value} ("an orange"), {cls} (the object's class; "scene" for
    image edits), {a_cls} ("a car"), {caption} (the source caption), {subject} (the caption
    without "a photo of ") and {attribute}. `aliases` maps other spellings to values.
    """

    name: ClassVar[str] = "editor"
    attribute: ClassVar[str] = ""
    kind: ClassVar[Literal["appearance", "geometry"]] = "appearance"
    level: ClassVar[Literal["object", "image"]] = "object"
    values: ClassVar[tuple[str, ...]] = ()
    levels: ClassVar[bool] = False
    aliases: ClassVar[dict[str, str]] = {}
    prompt_templates: ClassVar[dict[str, str]] = {}
    description: ClassVar[str] = ""
    requires: ClassVar[tuple[str, ...]] = ()  # modules it needs (`segtk plugins` checks them)
    install: ClassVar[str] = ""  # how to install them

    # Set by the edit job (`segtk edit --prompt-model`); `write_prompt` asks it.
    prompt_writer: PromptWriter | None = None

    @abstractmethod
    def edit(self, sample: Sample, value: str, rng: np.random.Generator) -> EditedSample:
        """Return the edited sample; must be deterministic given `rng`."""

    def check_value(self, value: str) -> str:
        """The canonical spelling of `value`, or a PluginError listing the values."""
        v = str(value).strip().lower()
        v = self.aliases.get(v, v)
        if v not in self.values:
            raise PluginError(f"editor {self.name!r} has no value {value!r}",
                              hint=f"values: {', '.join(self.values) or 'none declared'}")
        return v

    def parameters(self) -> dict[str, Any]:
        """What the manifest records about this editor's settings (JSON values)."""
        return {}

    def prompt(self, sample: Sample, value: str) -> str:
        """The edit prompt P* for `value`, from `prompt_templates`."""
        cls = phrase(sample.class_name) or "scene"
        source = sample.prompt or caption(cls)
        templates = self.prompt_templates
        template = templates.get(value, templates.get("*", DEFAULT_TEMPLATE))
        return template.format(value=value, a_value=f"{article(value)} {value}", cls=cls,
                               a_cls=f"{article(cls)} {cls}", caption=source,
                               subject=source.removeprefix("a photo of "),
                               attribute=self.attribute or self.name)

    def write_prompt(self, sample: Sample, value: str) -> tuple[str, str]:
        """(prompt, writer): the template's prompt, or the prompt writer's with its source."""
        text = self.prompt(sample, value)
        if self.prompt_writer is None:
            return text, ""
        return self.prompt_writer.rewrite(sample, self.attribute or self.name, value, text)


@dataclass
class NoOptions:
    """The options of an edit backend that declares none: it takes no `--param` key."""


class EditBackend(ABC):
    """Carries out attribute edits in place of an editor's own (classical) code.

    Registered as a class through `register_edit_backends`; an editor built with `--backend
    NAME` builds it as `cls(options)` (`segtk.core.build`), options being the `--param` keys
    the editor does not know itself, read as the fields of the backend's `Params` dataclass
    declare them (a key it does not declare is refused). `reference` names an editor whose
    output is this backend's robustness reference (the diffusion backend's `recon`: its
    reconstruction without an edit); `segtk bench edits` builds and scores that subset too.
    """

    name: ClassVar[str] = "backend"
    requires: ClassVar[tuple[str, ...]] = ()
    install: ClassVar[str] = ""
    description: ClassVar[str] = ""
    reference: ClassVar[str] = ""
    Params: ClassVar[type] = NoOptions  # a dataclass: the options it takes, with defaults

    def __init__(self, options: Mapping[str, Any]) -> None:
        """`options`: the keys given (text, or typed values from Python), read as `Params`
        declares them; a subclass may keep them in its own parsed form."""
        self.options: Any = declared(type(self)).read(options, "edit-backend", self.name)

    @abstractmethod
    def appearance(self, sample: Sample, value: str, prompt_src: str, prompt_edit: str,
                   rng: np.random.Generator | None) -> EditedSample:
        """Make `sample` show `prompt_edit` inside `sample.mask` (all True: the whole image)."""

    @abstractmethod
    def geometry(self, sample: Sample, moved: EditedSample,
                 rng: np.random.Generator | None) -> EditedSample:
        """Repaint `moved.repaint`, the area the rigidly moved object uncovered; the label and
        mask are `moved`'s."""

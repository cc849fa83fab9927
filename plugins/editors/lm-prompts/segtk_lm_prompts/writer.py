"""`LMPromptWriter` (prompt writer `lm`): a local causal LM rewrites the source caption into the edit prompt P*.

Gen4Seg has a language model rewrite the caption of an image into the edited caption ("a photo
of a car" -> "a photo of a red car"). Here a local chat model (any transformers causal LM whose
tokenizer has a chat template) gets a system message and a user message naming the class, the
attribute, the value and the source caption; it answers greedily (deterministic); the answer is
cleaned to one line. If the cleaned answer is empty, the template prompt is used and the
manifest says so (`prompt_writer: "template"`); otherwise `prompt_writer: "lm:PATH"`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch

from segtk.core import PluginError, PromptWriter, Sample

SYSTEM_PROMPT = (
    "You rewrite image captions for an image editing model. Given a caption, an object class, "
    "an attribute and a new value, answer with the edited caption only: one short line, no "
    "quotes, no explanation."
)


def clean_line(text: str, max_chars: int = 200) -> str:
    """The first non-empty line of `text`, without quotes, labels or extra spaces."""
    for line in text.replace("\r", "\n").split("\n"):
        line = re.sub(r"\s+", " ", line).strip()
        line = re.sub(r"^(edited caption|caption|answer|prompt)\s*:\s*", "", line, flags=re.I)
        line = line.strip(" \"'`*").strip()
        if len(line) > max_chars:  # cut at a word boundary
            line = line[:max_chars + 1].rsplit(" ", 1)[0][:max_chars]
        if line:
            return line.rstrip(" ,;:")
    return ""


class LMPromptWriter(PromptWriter):
    """Edit prompts from a local causal LM (`AutoModelForCausalLM`, loaded offline from `path`).

    `write(...)` and `rewrite(...)` return (prompt, source), source being "lm:PATH" or
    "template" (the template is used only when the model's cleaned answer is empty). Answers
    are cached per (caption, class, attribute, value), so variants of one edit share one
    generation.
    """

    name = "lm"
    requires = ("transformers",)
    install = "pip install transformers  (or: pip install -e plugins/editors/lm-prompts)"
    description = "a local transformers chat LM rewrites the source caption (--prompt-model DIR)"

    def __init__(self, model: str | Path, max_new_tokens: int = 40, device: str = "cpu",
                 option: str = "--prompt-model") -> None:
        """model: the local folder of the causal LM and its tokenizer (`--prompt-model`).
        max_new_tokens: the longest answer generated. device: where the LM runs. option: the
        option that named the folder, in errors."""
        self.path = Path(model)
        if not str(model).strip() or not self.path.is_dir():
            raise PluginError(f"{option} {model}: no such model folder",
                              hint="give a local folder holding a transformers causal LM and its "
                                   "tokenizer (save_pretrained); nothing is downloaded")
        try:
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:
            raise PluginError(f"{option} needs transformers ({exc})",
                              hint="pip install transformers") from exc
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(self.path, local_files_only=True)
            lm: Any = AutoModelForCausalLM.from_pretrained(self.path, local_files_only=True)
        except (OSError, ValueError) as exc:
            raise PluginError(f"{option} {model}: cannot load a causal LM and tokenizer: {exc}",
                              hint="the folder needs config.json, the weights and the tokenizer "
                                   "files") from exc
        if not getattr(self.tokenizer, "chat_template", None):
            raise PluginError(f"{option} {model}: the tokenizer has no chat template",
                              hint="use an instruction/chat model (tokenizer_config.json "
                                   "'chat_template')")
        self.lm = lm.to(device).eval()
        self.device = device
        self.max_new_tokens = max_new_tokens
        self.source = f"lm:{model}"
        self._cache: dict[tuple[str, str, str, str], tuple[str, str]] = {}

    def messages(self, caption: str, class_name: str, attribute: str,
                 value: str) -> list[dict[str, str]]:
        user = (f"Caption: {caption}\nObject class: {class_name or 'the whole image'}\n"
                f"Attribute: {attribute}\nNew value: {value}\nEdited caption:")
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]

    def prompt_ids(self, messages: list[dict[str, str]]) -> Any:
        """The chat-templated input ids (1 × T tensor), generation prompt appended."""
        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True,
                                                 return_tensors="pt")
        if not hasattr(ids, "shape"):  # BatchEncoding in some transformers versions
            ids = ids["input_ids"]
        return ids.to(self.device)

    def generate(self, messages: list[dict[str, str]]) -> str:
        """The model's raw answer (greedy, deterministic), without the prompt tokens."""
        ids = self.prompt_ids(messages)
        tok = self.tokenizer
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        with torch.no_grad():
            out = self.lm.generate(ids, attention_mask=torch.ones_like(ids),
                                      max_new_tokens=self.max_new_tokens, do_sample=False,
                                      num_beams=1, pad_token_id=pad)
        return tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True)

    def write(self, caption: str, class_name: str, attribute: str, value: str,
              template: str) -> tuple[str, str]:
        key = (caption, class_name, attribute, value)
        if key not in self._cache:
            text = clean_line(self.generate(self.messages(caption, class_name, attribute, value)))
            self._cache[key] = (text, self.source) if text else (template, "template")
        return self._cache[key]

    def rewrite(self, sample: Sample, attribute: str, value: str,
                template: str) -> tuple[str, str]:
        """(prompt, source) for a segtk Sample (what `Editor.write_prompt` asks)."""
        caption = sample.prompt or template
        return self.write(caption, sample.class_name.replace("_", " "), attribute, value, template)

"""segtk plugin: the prompt writer `lm`, edit prompts written by a local causal LM.

`segtk edit --prompt-model PATH` (prompt writer `lm`, the default of --prompt-writer) hands an
`LMPromptWriter` to the editor, which asks it instead of using its own prompt templates.
"""

from segtk.core import hookimpl
from segtk_lm_prompts.writer import SYSTEM_PROMPT, LMPromptWriter, clean_line

__all__ = ["SYSTEM_PROMPT", "LMPromptWriter", "clean_line"]


@hookimpl
def register_prompt_writers(register) -> None:
    register(LMPromptWriter)

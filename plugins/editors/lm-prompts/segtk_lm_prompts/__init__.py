"""segtk plugin: edit prompts for `segtk edit --prompt-model PATH` written by a local causal LM.

It registers no editor: `segtk edit` imports it when --prompt-model is given and hands the
`PromptWriter` to the attribute editors, which use it instead of the templates of
`segtk.core.samples`.
"""

from segtk_lm_prompts.writer import SYSTEM_PROMPT, PromptWriter, clean_line

__all__ = ["SYSTEM_PROMPT", "PromptWriter", "clean_line"]

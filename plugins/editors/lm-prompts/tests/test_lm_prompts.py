"""segtk-lm-prompts: a tiny random Llama and a WordLevel tokenizer with a chat template, built
and saved offline, loaded through the real `from_pretrained(..., local_files_only=True)` path.
A random model writes gibberish: these tests check the mechanics, not the prompts' quality."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest
from click.testing import CliRunner

from segtk.cli import cli
from segtk.core import Editor, PluginError, SegtkError, registry
from segtk.jobs.edit import EditConfig, edit_dataset
from segtk.testing import PromptWriterSuite
from segtk_lm_prompts import SYSTEM_PROMPT, LMPromptWriter, clean_line

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} <|end|> {% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
SPECIAL = ["<unk>", "<pad>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>"]
WORDS = ("caption object class attribute new value edited a an photo of car building tree "
         "the whole image made wood glass red blue material color colour : , . smaller")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    words = sorted(set(WORDS.split()) | {w.strip(".,:") for w in SYSTEM_PROMPT.lower().split()}
                   | {":", ",", "."})
    vocab = {t: i for i, t in enumerate(SPECIAL + [w for w in words if w])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                 pre_tokenizers.Punctuation()])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>",
                                   eos_token="<|end|>",
                                   additional_special_tokens=SPECIAL[3:])
    fast.chat_template = CHAT_TEMPLATE
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=16, intermediate_size=32,
                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                         max_position_embeddings=256, pad_token_id=vocab["<pad>"],
                         eos_token_id=vocab["<|end|>"], bos_token_id=None)
    path = tmp_path_factory.mktemp("lm") / "tiny-chat-lm"
    LlamaForCausalLM(config).save_pretrained(path)
    fast.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def writer(model_dir) -> LMPromptWriter:
    return LMPromptWriter(model_dir)


def contains(seq: list[int], sub: list[int]) -> bool:
    return any(seq[i:i + len(sub)] == sub for i in range(len(seq) - len(sub) + 1))


def test_chat_template_is_applied(writer) -> None:
    messages = writer.messages("a photo of a car", "car", "color", "red")
    assert [m["role"] for m in messages] == ["system", "user"]
    ids = writer.prompt_ids(messages)[0].tolist()
    tok = writer.tokenizer
    user = tok.encode(messages[1]["content"], add_special_tokens=False)
    assert tok.unk_token_id not in user[:4]  # "caption : a photo": words the vocab knows
    assert contains(ids, user) and contains(ids, tok.encode(SYSTEM_PROMPT, add_special_tokens=False))
    roles = tok.convert_tokens_to_ids(["<|system|>", "<|user|>", "<|assistant|>"])
    assert ids[0] == roles[0] and roles[1] in ids and ids[-1] == roles[2]  # generation prompt


def test_generation_is_deterministic_and_one_clean_line(writer, model_dir) -> None:
    args = ("a photo of a car", "car", "color", "red", "a photo of a red car")
    raw = writer.generate(writer.messages(*args[:4]))
    assert raw == writer.generate(writer.messages(*args[:4]))
    prompt, source = writer.write(*args)
    assert source == f"lm:{model_dir}"
    assert prompt and "\n" not in prompt and prompt == prompt.strip() and "  " not in prompt
    assert prompt == clean_line(raw)
    fresh = LMPromptWriter(model_dir)  # a second load answers the same
    assert fresh.write(*args) == (prompt, source)


def test_clean_line_and_empty_answer_falls_back_to_template(model_dir, monkeypatch) -> None:
    assert clean_line('\n  \n Edited caption:  "a photo of  a red car"\nmore') == \
        "a photo of a red car"
    assert clean_line(" \n\t ") == ""
    assert clean_line("word " * 100, max_chars=22) == "word word word word"
    writer = LMPromptWriter(model_dir)
    monkeypatch.setattr(writer, "generate", lambda messages: " \n ")
    assert writer.write("c", "car", "color", "red", "a photo of a red car") == \
        ("a photo of a red car", "template")


def test_missing_model_folder_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(PluginError, match="--prompt-model .*no such model folder"):
        LMPromptWriter(tmp_path / "nope")
    result = CliRunner().invoke(cli, ["edit", "--plugin", "material", "--limit", "1",
                                      "--out", str(tmp_path / "o"),
                                      "--prompt-model", str(tmp_path / "nope")])
    assert result.exit_code != 0
    assert "--prompt-model" in result.output and "no such model folder" in result.output
    assert not (tmp_path / "o").exists()


def test_segtk_edit_with_prompt_model_records_the_writer(model_dir, tmp_path) -> None:
    out = tmp_path / "edit"
    args = ["edit", "--plugin", "material", "--values", "wood", "--limit", "2",
            "--out", str(out), "--prompt-model", str(model_dir), "--sheet-rows", "0"]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    manifest = [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
    assert manifest
    writer = LMPromptWriter(model_dir)
    for rec in manifest:
        assert rec["prompt_writer"] == f"lm:{model_dir}"
        assert rec["prompt_source"] == "a photo of a building"  # the source caption, as before
        expected, _ = writer.write(rec["prompt_source"], rec["class"], "material", "wood",
                                   "a photo of a building made of wood")
        assert rec["prompt"] == expected and "\n" not in rec["prompt"]
    run = json.loads((out / "run.json").read_text())
    assert run["config"]["prompt_model"] == str(model_dir)


def test_bench_edits_with_prompt_model_writes_one_drawn_prompt_per_image(model_dir,
                                                                          tmp_path) -> None:
    out = tmp_path / "bench"
    args = ["bench", "edits", "--models", "demo", "--attributes", "material,size", "--values",
            "material=wood,metal,glass", "--values", "size=0.4", "--limit", "3",
            "--executor", "inline", "--out", str(out), "--prompt-model", str(model_dir)]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    writer = LMPromptWriter(model_dir)
    for subset, attribute in (("material", "material"), ("size-0.4", "size")):
        manifest = [json.loads(x) for x in
                    (out / "edits" / subset / "manifest.jsonl").read_text().splitlines()]
        assert manifest and len({r["source"] for r in manifest}) == len(manifest)
        for rec in manifest:
            assert rec["prompt_writer"] == f"lm:{model_dir}"
            expected, _ = writer.write(rec["prompt_source"], rec["class"], attribute,
                                       rec["value"], "unused")
            assert rec["prompt"] == expected
        config = json.loads((out / "edits" / subset / "run.json").read_text())["config"]
        assert config["prompt_model"] == str(model_dir)
    assert json.loads((out / "run.json").read_text())["config"]["prompt_model"] == str(model_dir)


def test_prompt_model_needs_an_attribute_editor(tmp_path) -> None:
    class Own(Editor):
        name = "own"

        def edit(self, sample, value, rng):
            raise AssertionError("not reached")

    run = type("Run", (), {"path": tmp_path})()
    with pytest.raises(SegtkError, match="--prompt-model: editor 'own' writes its own prompts"):
        # refused before the dataset or the writer is looked at: stand-ins of any type do
        edit_dataset(Own(), cast(Any, None), run, EditConfig(["x"], prompt_writer=cast(Any, object())))


def test_registered_as_prompt_writer_lm() -> None:
    info = {(i.kind, i.name): i for i in registry.plugins()}
    assert info[("prompt-writer", "lm")].distribution == "segtk-lm-prompts"
    assert registry.prompt_writer("lm") is LMPromptWriter


class TestLMContract(PromptWriterSuite):
    """The prompt writer contract (segtk.testing), on the tiny random chat LM: one-line prompts
    with their source, the same answer to the same question, the sample untouched."""

    writer_cls = LMPromptWriter

    @pytest.fixture(autouse=True)
    def _model(self, model_dir: Path) -> None:
        self.model = model_dir

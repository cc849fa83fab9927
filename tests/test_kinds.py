"""One table of plugin kinds (core/_kinds.py) drives the hooks, the registry's typed lookups,
`build`, `segtk plugins new` and `segtk plugins show`; docs/write-a-plugin.md documents every
hook with its signature; and every kind refuses an unknown parameter key with the same error."""

from __future__ import annotations

import inspect
import json
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
import torch
from click.testing import CliRunner

from segtk.cli import cli
from segtk.core import (
    Attack,
    Augmenter,
    Captioner,
    EditBackend,
    EditedSample,
    Filter,
    FilterResult,
    Metric,
    PluginError,
    PromptWriter,
    Sample,
    SegtkError,
    _kinds,
    build,
    hookimpl,
    load_dataset,
    registry,
)
from segtk.core._hookspecs import HOOKS, SPECS
from segtk.core._kinds import KINDS
from segtk.core._plugins import get_plugin_manager, reset_plugin_manager
from segtk.editkit import AttributeEditor
from segtk.jobs.edit import load_prompt_writer

ROOT = Path(__file__).resolve().parent.parent


# --- the table drives the hooks, the lookups, the scaffold and `plugins show` -------------------


def test_every_kind_has_its_hook() -> None:
    assert [k.name for k in KINDS] == [k.name for k in registry.KINDS]  # one table
    assert sorted(HOOKS) == sorted([k.hook for k in KINDS] + ["register_commands"])
    for kind in KINDS:
        assert list(inspect.signature(getattr(SPECS, kind.hook)).parameters) == ["register"]
        assert getattr(SPECS, kind.hook).__doc__ == kind.doc


def test_the_model_kind_is_called_model_and_the_former_name_is_refused_naming_it() -> None:
    """One word for the model kind: the kind, its hook, its scaffold and `segtk plugins`."""
    row = _kinds.kind("model")
    assert (row.hook, row.template, row.suite) == ("register_models", "model", "SegmenterSuite")
    assert "segmenter" not in _kinds.BY_NAME and "register_segmenters" not in HOOKS
    with pytest.raises(PluginError, match="the plugin kind 'segmenter' is called 'model'"):
        _kinds.kind("segmenter")
    listed = json.loads(CliRunner().invoke(cli, ["plugins", "--json"]).output)
    assert {r["kind"] for r in listed if r["name"] == "demo"} == {"model", "dataset"}
    shown = CliRunner().invoke(cli, ["plugins", "show", "demo", "--kind", "segmenter"])
    assert shown.exit_code == 2
    assert "the plugin kind 'segmenter' is called 'model': use 'model'" in shown.output


def test_a_new_row_is_a_new_hook_a_lookup_and_a_scaffold_kind(monkeypatch) -> None:
    """What a row adds, nothing else needed: the hook pluggy validates against, the registry's
    listing and checked lookup. (A hook implemented without a row is a broken plugin.)"""
    from segtk.core import _hookspecs, _kinds, _plugins

    class Probe:
        name = "probe"

    row = _kinds.Kind("probe", "register_probes", Probe, _kinds.keywords, "AttackSuite",
                      "attack", "--param {key}=VALUE", "Register probes.")
    monkeypatch.setattr(_kinds, "KINDS", (*_kinds.KINDS, row))
    monkeypatch.setattr(_kinds, "BY_NAME", {k.name: k for k in _kinds.KINDS})
    monkeypatch.setattr(registry, "KINDS", _kinds.KINDS)
    monkeypatch.setattr(_hookspecs, "SPECS", type("HookSpecs", (_hookspecs.SPECS,), {
        "register_probes": _hookspecs.hookspec(_hookspecs._kind_hook(row.hook, row.doc))}))
    reset_plugin_manager()
    try:
        pm = _plugins.PluginManager()
        pm.register(types.SimpleNamespace(register_probes=hookimpl(lambda register: register(Probe))),
                    name="probe-plugin")
        pm.check_hooks()
        assert not pm.broken
        monkeypatch.setattr(_plugins, "_manager", pm)
        registry.reset()
        assert [i.kind for i in registry.plugins() if i.name == "probe"] == ["probe"]
        assert registry.plugin_class("probe", "probe") is Probe
    finally:
        reset_plugin_manager()


def test_plugins_show_takes_every_kind() -> None:
    result = CliRunner().invoke(cli, ["plugins", "show", "nope", "--kind", "prompt-writer"])
    assert result.exit_code == 1 and "no prompt-writer plugin named 'nope'" in result.output
    result = CliRunner().invoke(cli, ["plugins", "show", "--help"])
    for kind in KINDS:
        assert kind.name in result.output


def test_plugins_show_says_how_to_set_an_edit_backends_parameters() -> None:
    result = CliRunner().invoke(cli, ["plugins", "show", "diffusion", "--kind", "edit-backend",
                                      "--json"])
    assert result.exit_code == 0, result.output
    (shown,) = json.loads(result.output)
    rows = {p["name"]: p for p in shown["parameters"]}
    assert rows["steps"] == {"name": "steps", "type": "int", "default": 50, "doc": "",
                             "set_with": "--param steps=VALUE"}


def test_plugins_show_gives_a_metric_and_a_captioner_an_example() -> None:
    shown = {}
    for name, kind in (("clip-accuracy", "metric"), ("blip", "captioner")):
        result = CliRunner().invoke(cli, ["plugins", "show", name, "--kind", kind, "--json"])
        assert result.exit_code == 0, result.output
        shown[kind] = json.loads(result.output)[0]["examples"]
    assert shown == {
        "metric": ["segtk bench edits --attributes color --quality clip-accuracy "
                   "--metric-param clip-accuracy.model=VALUE"],
        "captioner": ["segtk edit --plugin weather --captioner blip --captioner-param model=VALUE"],
    }


# --- the docs: every hook, with its signature ------------------------------------------------


def documented_hooks() -> dict[str, tuple[str, str]]:
    """docs/write-a-plugin.md's hook table: hook -> (its signature as written, its suite)."""
    text = (ROOT / "docs" / "write-a-plugin.md").read_text()
    section = text.split("## The hooks", 1)[1].split("\n### ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `register_")]
    out = {}
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        signature = cells[0].strip("`")
        out[signature.partition("(")[0]] = (signature, cells[-1].strip("`"))
    return out


def signature_of(hook: str) -> str:
    return f"{hook}({', '.join(inspect.signature(getattr(SPECS, hook)).parameters)})"


def check_docs(documented: dict[str, tuple[str, str]]) -> list[str]:
    problems = []
    for hook in sorted(set(HOOKS) - set(documented)):
        problems.append(f"{signature_of(hook)} is not in the docs' hook table")
    for hook in sorted(set(documented) - set(HOOKS)):
        problems.append(f"the docs' hook table has {hook}, which segtk does not define")
    suites = {k.hook: k.suite for k in KINDS}
    for hook, (signature, suite) in sorted(documented.items()):
        if hook in HOOKS and signature != signature_of(hook):
            problems.append(f"the docs write {signature}, the hook is {signature_of(hook)}")
        if hook in suites and suite != suites[hook]:
            problems.append(f"the docs give {hook} the suite {suite!r}, segtk {suites[hook]!r}")
    return problems


def test_every_hook_is_documented_with_its_signature() -> None:
    assert check_docs(documented_hooks()) == []


def test_the_docs_check_finds_a_missing_an_extra_and_a_wrong_hook() -> None:
    documented = dict(documented_hooks())
    del documented["register_filters"]
    documented["register_attack"] = ("register_attack(register)", "AttackSuite")
    documented["register_commands"] = ("register_commands(group)", "—")
    assert check_docs(documented) == [
        "register_filters(register) is not in the docs' hook table",
        "the docs' hook table has register_attack, which segtk does not define",
        "the docs write register_commands(group), the hook is register_commands(cli)",
    ]


# --- an unknown key is refused by every kind, with one error ----------------------------------


@dataclass
class ToyParams:
    strength: float = 0.5


class ToyBackend(EditBackend):
    """Declares `strength`; keeps whatever it is given without a check of its own, so only the
    way segtk builds it can refuse a key it does not declare."""

    name = "toy-backend"
    Params = ToyParams

    def __init__(self, options: dict[str, Any]) -> None:
        self.options = dict(options)

    def appearance(self, sample, value, prompt_src, prompt_edit, rng):
        return EditedSample(255 - sample.image, sample.label, sample.mask, value)

    def geometry(self, sample, moved, rng):
        return moved


class ToyWriter(PromptWriter):
    """Takes the model and `style`; no check of its own either."""

    name = "toy-writer"

    def __init__(self, model: str, style: str = "plain") -> None:
        self.model, self.style = model, style

    def rewrite(self, sample, attribute, value, template):
        return template, "template"


class ToyEditor(AttributeEditor):
    name = attribute = "toy-editor"
    values = ("dark",)
    defaults: ClassVar[dict[str, Any]] = {"amount": 0.5}
    requires = ()

    def classical(self, sample, value, rng):
        return EditedSample(sample.image // 2, sample.label, sample.mask, value)


class ToyAugmenter(Augmenter):
    name = "toy-augmenter"
    defaults: ClassVar[dict[str, Any]] = {"p": 0.5}

    def apply(self, images, labels, generator):
        return images, labels


class ToyFilter(Filter):
    name = "toy-filter"

    def __init__(self, threshold: float = 0.5) -> None:
        self.threshold = threshold

    def apply(self, original: Sample, edited: EditedSample) -> FilterResult:
        return FilterResult(True)


@dataclass
class ToyMetricParams:
    power: float = 1.0


class ToyMetric(Metric):
    name = "toy-metric"
    Params = ToyMetricParams

    def scores(self, pairs):
        return [0.0 for _ in pairs]


class ToyCaptioner(Captioner):
    name = "toy-captioner"
    Params = ToyParams

    def caption(self, image, mask, class_name):
        return "a photo"


class ToyAttack(Attack):
    name = "toy-attack"

    def attack(self, oracle) -> None:
        oracle.query(oracle.clean)


@pytest.fixture
def toys():
    reset_plugin_manager()
    get_plugin_manager().register(types.SimpleNamespace(
        register_attacks=hookimpl(lambda register: register(ToyAttack)),
        register_editors=hookimpl(lambda register: register(ToyEditor)),
        register_filters=hookimpl(lambda register: register(ToyFilter)),
        register_augmenters=hookimpl(lambda register: register(ToyAugmenter)),
        register_edit_backends=hookimpl(lambda register: register(ToyBackend)),
        register_prompt_writers=hookimpl(lambda register: register(ToyWriter)),
        register_metrics=hookimpl(lambda register: register(ToyMetric)),
        register_captioners=hookimpl(lambda register: register(ToyCaptioner)),
    ), name="segtk-toy-kinds")
    registry.reset()
    yield
    reset_plugin_manager()


# kind -> (plugin, the parameters it takes, the settings given by their own options)
CLASS_KINDS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "attack": ("toy-attack", "budget=50", {"budget": 3}),
    "editor": ("toy-editor", "amount=0.5", {"backend": "classical"}),
    "filter": ("toy-filter", "threshold=0.5", {}),
    "augmenter": ("toy-augmenter", "p=0.5", {}),
    "edit-backend": ("toy-backend", "strength=0.5", {}),
    "prompt-writer": ("toy-writer", "style=plain", {"model": "m"}),
    "metric": ("toy-metric", "power=1.0", {}),
    "captioner": ("toy-captioner", "strength=0.5", {}),
}


def test_the_class_kinds_are_the_tables() -> None:
    assert set(CLASS_KINDS) == {k.name for k in KINDS if k.is_class}


@pytest.mark.parametrize("kind", list(CLASS_KINDS))
def test_every_class_kind_refuses_an_unknown_key_with_one_error(toys, kind: str) -> None:
    name, takes, shared = CLASS_KINDS[kind]
    build(kind, name, {}, **shared)  # builds without it
    with pytest.raises(PluginError) as err:
        build(kind, name, {"bogus": "1"}, **shared)
    assert err.value.message == f"unknown parameter 'bogus' for {kind} {name!r}"
    assert str(err.value.hint).startswith(f"{name} takes: ") and takes in str(err.value.hint)


def test_the_declared_keys_are_read_as_declared(toys) -> None:
    backend = build("edit-backend", "toy-backend", {"strength": "0.25"})
    assert backend.options == {"strength": 0.25}
    writer = build("prompt-writer", "toy-writer", {"style": "terse"}, model="m")
    assert (writer.model, writer.style) == ("m", "terse")
    with pytest.raises(PluginError, match="cannot read strength='lots': expected a number"):
        build("edit-backend", "toy-backend", {"strength": "lots"})


def test_an_editors_backend_refuses_a_key_neither_declares(toys) -> None:
    """`segtk edit --backend NAME --param K=V`: a key the editor does not know goes to the
    backend, which is built by `build` and refuses it (never handed raw text it ignores)."""
    editor = ToyEditor(backend="toy-backend", strength="0.3")
    assert editor.engine is not None and editor.engine.options == {"strength": 0.3}
    with pytest.raises(PluginError) as err:
        ToyEditor(backend="toy-backend", strenght="0.3")
    assert err.value.message == ("unknown parameter 'strenght' for edit-backend 'toy-backend' "
                                 "(did you mean 'strength'?)")
    with pytest.raises(PluginError) as err:
        ToyEditor(strenght="0.3")  # classical: the editor's own defaults
    assert err.value.message == "unknown parameter 'strenght' for editor 'toy-editor'"


def test_the_edit_job_builds_its_prompt_writer(toys) -> None:
    writer = load_prompt_writer("toy-writer", "some/model")
    assert isinstance(writer, ToyWriter) and writer.model == "some/model"


def test_constructed_directly_the_bases_refuse_the_same_way() -> None:
    """Python callers skip `build`: the bases read their parameters with the same `read`."""

    class Declaring(EditBackend):
        name = "declaring"
        Params = ToyParams

        def appearance(self, sample, value, prompt_src, prompt_edit, rng):
            raise NotImplementedError

        def geometry(self, sample, moved, rng):
            raise NotImplementedError

    assert Declaring({"strength": "0.1"}).options == {"strength": 0.1}
    assert ToyMetric({"power": "2"}).params == ToyMetricParams(2.0)
    for make, kind, name in ((lambda: Declaring({"bogus": 1}), "edit-backend", "declaring"),
                             (lambda: ToyMetric({"bogus": 1}), "metric", "toy-metric"),
                             (lambda: ToyCaptioner({"bogus": 1}), "captioner", "toy-captioner"),
                             (lambda: ToyAugmenter(bogus=1), "augmenter", "toy-augmenter"),
                             (lambda: ToyEditor(bogus=1), "editor", "toy-editor")):
        with pytest.raises(PluginError) as err:
            make()
        assert err.value.message == f"unknown parameter 'bogus' for {kind} {name!r}"


def test_the_bundled_backend_and_prompt_writer_refuse_an_unknown_key() -> None:
    """The diffusion backend and the `lm` writer, refused before any weight is read."""
    with pytest.raises(PluginError) as err:
        build("edit-backend", "diffusion", {"blnd": "false", "allow_no_controlnet": "1"})
    assert err.value.message == ("unknown parameter 'blnd' for edit-backend 'diffusion' "
                                 "(did you mean 'blend'?)")
    with pytest.raises(PluginError) as err:
        build("prompt-writer", "lm", {"temperature": "0"}, model="no/such/folder")
    assert err.value.message == "unknown parameter 'temperature' for prompt-writer 'lm'"
    assert "max_new_tokens=40" in str(err.value.hint)


@pytest.mark.parametrize("spec,message", [
    ("demo:bogus=1", "unknown demo option 'bogus'"),  # a dataset reader's options
    ("demo:fresh=2,sead=1", "unknown demo option 'sead'"),
])
def test_loader_kinds_refuse_an_unknown_option_of_their_spec(spec: str, message: str) -> None:
    """Segmenters and datasets are loaders: they read their own spec's options with
    `parse_pairs`, which refuses a key they do not list, naming those they do."""
    with pytest.raises(SegtkError) as err:
        load_dataset(spec)
    assert err.value.message.startswith(message) and "fresh=, seed=" in str(err.value.hint)


def test_a_segmenter_spec_refuses_an_unknown_option(tmp_path: Path) -> None:
    from segtk.core import load_segmenter

    model = tmp_path / "m.pt"
    torch.jit.save(torch.jit.script(torch.nn.Conv2d(3, 2, 1)), str(model))
    with pytest.raises(SegtkError) as err:
        load_segmenter(f"torchscript:{model},classes=a;b,sise=4x4")
    assert "unknown torchscript option 'sise'" in err.value.message and "size=" in str(err.value.hint)


def test_loaders_are_not_built_from_parameters() -> None:
    with pytest.raises(PluginError, match="dataset plugins are loaders"):
        build("dataset", "demo", {})

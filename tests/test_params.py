"""Plugin parameters from text: the one converter, the one KEY=VALUE reader, `build` and the
typed registry lookups, on toy plugins registered here (no installed plugin needed)."""

from __future__ import annotations

import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import pytest

from segtk.core import (
    Attack,
    AttackParams,
    EditedSample,
    Editor,
    Filter,
    FilterResult,
    ModelError,
    PluginError,
    SegmenterPlugin,
    SegtkError,
    hookimpl,
    registry,
)
from segtk.core._build import build
from segtk.core._params import (
    convert,
    declared,
    describe,
    kind_of,
    parse_pairs,
)
from segtk.core._plugins import get_plugin_manager, reset_plugin_manager

# --- convert ----------------------------------------------------------------------------------


@pytest.mark.parametrize("raw,kind,expected", [
    ("yes", bool, True), ("OFF", bool, False), (" 7 ", int, 7), ("-2", int, -2),
    ("2.5", float, 2.5), ("3", float, 3.0), ("a b", str, "a b"), ("~/x", Path, Path.home() / "x"),
    ("a,b,,c", list[str], ["a", "b", "c"]), ("1,2", list[int], [1, 2]),
    ("1,2,3", tuple[float, ...], (1.0, 2.0, 3.0)), ("64x32", tuple[int, int], (64, 32)),
    ("none", int | None, None), ("4", int | None, 4), ("0.5", float | str, 0.5),
    ("auto", float | str, "auto"), ("b", Literal["a", "b"], "b"),
    ("3", Any, 3), ("(1, 2)", Any, (1, 2)), ("True", Any, True), ("some/path", Any, "some/path"),
])
def test_convert_reads_each_kind(raw: str, kind: Any, expected: Any) -> None:
    sep = "x" if kind == tuple[int, int] else ","
    value = convert(raw, kind, "k", sep=sep)
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize("raw,kind,expected", [
    ("maybe", bool, "true or false"), ("1.5", int, "an integer"), ("ten", float, "a number"),
    ("1;2", tuple[float, float, float], "3 numbers separated by ';'"),
    ("c", Literal["a", "b"], "one of a, b"), ("x", int | None, "an integer or none"),
    ("1;x", list[int], "a list of integers separated by ';'"), ("", Path, "a path"),
])
def test_convert_error_names_key_value_and_expected_type(raw: str, kind: Any, expected: str) -> None:
    with pytest.raises(ModelError) as err:
        convert(raw, kind, "knob", sep=";", error=ModelError, hint="see the README")
    assert err.value.message == f"cannot read knob={raw!r}: expected {expected}"
    assert err.value.hint == "see the README"


def test_convert_keeps_values_that_are_not_text() -> None:
    assert convert(3, float, "k") == 3 and convert(None, int, "k") is None


def test_kind_of_reads_the_default() -> None:
    assert [kind_of(v) for v in (True, 1, 1.0, "s", Path("p"), None)] == [bool, int, float, str, Path, Any]
    assert kind_of([1]) == list[int] and kind_of((0, 0)) == tuple[int, int]
    assert describe(kind_of((0.0, 1.0)), ";") == "2 numbers separated by ';'"


# --- parse_pairs ------------------------------------------------------------------------------


def test_parse_pairs_strips_and_keeps_text() -> None:
    assert parse_pairs([" a = 1 ", "b=x=y", "c="], "--param") == {"a": "1", "b": "x=y", "c": ""}
    assert parse_pairs(["bgr", "size=1x2"], "onnx option", ["size"], flags=["bgr"]) == \
        {"bgr": "true", "size": "1x2"}
    with pytest.raises(SegtkError) as err:
        parse_pairs(["size"], "onnx option", ["size"], flags=["bgr"])
    assert err.value.hint == "allowed: size=, bgr"
    with pytest.raises(SegtkError) as err:
        parse_pairs(["x"], "--values", hint="e.g. --values color=red")
    assert err.value.hint == "e.g. --values color=red"
    with pytest.raises(SegtkError) as err:
        parse_pairs(["x=1"], "spec option", ["size"], hint="syntax: S")
    assert err.value.hint == "allowed: size=; syntax: S"


@pytest.mark.parametrize("items,message,hint", [
    (["alpha"], "cannot read --param 'alpha': expected KEY=VALUE", "allowed: alpha=, beta="),
    (["=1"], "cannot read --param '=1': expected KEY=VALUE", "allowed: alpha=, beta="),
    (["gamma=1"], "unknown --param 'gamma' in 'gamma=1'", "allowed: alpha=, beta="),
    (["alpha=1", "alpha=2"], "--param 'alpha' is given twice (alpha='1' and 'alpha=2')",
     "give each key once"),
])
def test_parse_pairs_errors_name_the_item_and_the_keys(items, message, hint) -> None:
    with pytest.raises(SegtkError) as err:
        parse_pairs(items, "--param", ["alpha", "beta"])
    assert (err.value.message, err.value.hint) == (message, hint)


def test_parse_pairs_without_allowed_keys_says_the_syntax() -> None:
    with pytest.raises(PluginError, match="expected KEY=VALUE") as err:
        parse_pairs(["x"], "--values", error=PluginError)
    assert err.value.hint == "write --values KEY=VALUE"


# --- toy plugins and build --------------------------------------------------------------------


@dataclass
class ToyParams(AttackParams):
    steps: int = 3
    mode: Literal["fast", "slow"] = "fast"
    scale: float | None = None


class ToyAttack(Attack):
    name = "toy-attack"
    Params = ToyParams

    def attack(self, oracle) -> None:
        oracle.query(oracle.clean)


class ToyEditor(Editor):
    """Declares its parameters in `defaults`; other keys (a backend's) arrive as text."""

    name = "toy-editor"
    defaults: ClassVar[dict[str, Any]] = {"strength": 1.0, "flip": False, "size": (1, 2)}

    def __init__(self, backend: str = "classical", **params: Any) -> None:
        self.backend, self.params = backend, params

    def edit(self, sample, value, rng) -> EditedSample:
        raise NotImplementedError


class OptionsEditor(Editor):
    """Takes what it does not declare in `options` (like segtk-diffusion's recon)."""

    name = "toy-options"

    def __init__(self, steps: int = 10, options: dict[str, Any] | None = None) -> None:
        self.steps, self.options = steps, options

    def edit(self, sample, value, rng) -> EditedSample:
        raise NotImplementedError


class ToyFilter(Filter):
    name = "toy-filter"

    def __init__(self, model: str | None = None, alpha: float | str = 2.0, dirs: list[Path] | None = None,
                 strict: bool = False) -> None:
        if alpha == "bad":
            raise ValueError("alpha must be a number")
        self.model, self.alpha, self.dirs, self.strict = model, alpha, dirs, strict

    def apply(self, original, edited) -> FilterResult:
        return FilterResult(True)


class CrashingFilter(Filter):
    """Its constructor fails in its own code whatever the values: not a parameter problem."""

    name = "toy-crashing"

    def __init__(self, how: str = "attribute") -> None:
        if how == "attribute":
            len(self.model)  # type: ignore[attr-defined]  # a bug: AttributeError
        if how == "none":
            len(None)  # type: ignore[arg-type]  # a bug: TypeError inside the constructor
        if how == "exit":
            raise SystemExit(3)
        raise RuntimeError("weights file vanished")

    def apply(self, original, edited) -> FilterResult:
        return FilterResult(True)


class NotAFilter:
    name = "not-a-filter"


def toy_plugin() -> types.SimpleNamespace:
    def editors(register) -> None:
        register(ToyEditor)
        register(OptionsEditor)

    def filters(register) -> None:
        register(ToyFilter)
        register(CrashingFilter)

    return types.SimpleNamespace(
        register_attacks=hookimpl(lambda register: register(ToyAttack)),
        register_editors=hookimpl(editors),
        register_filters=hookimpl(filters),
    )


@pytest.fixture
def toys():
    reset_plugin_manager()
    get_plugin_manager().register(toy_plugin(), name="toy-params-test")
    registry.reset()
    yield
    reset_plugin_manager()


def test_building_an_attack_reads_params_by_their_annotations(toys) -> None:
    items = parse_pairs(["steps=5", "mode=slow", "scale=none"], "--param")
    attack = build("attack", "toy-attack", items, budget=7, eps=4.0)
    assert (attack.params.steps, attack.params.mode, attack.params.scale) == (5, "slow", None)
    assert (attack.params.budget, attack.params.eps) == (7, 4.0)
    assert build("attack", "toy-attack", {"scale": "0.5"}).params.scale == 0.5


@pytest.mark.parametrize("items,message", [
    (["steps=many"], "cannot read steps='many': expected an integer"),
    (["mode=medium"], "cannot read mode='medium': expected one of fast, slow"),
    (["bogus=1"], "unknown parameter 'bogus' for attack 'toy-attack'"),
    (["budget=9"], "parameter 'budget' of attack 'toy-attack' is set by its own option"),
    (["eps=300"], "eps must be in (0, 255], got 300.0"),  # the attack's own check
])
def test_building_an_attack_errors_are_one_line(toys, items, message) -> None:
    with pytest.raises(SegtkError) as err:
        build("attack", "toy-attack", parse_pairs(items, "--param"), budget=7)
    assert err.value.message.startswith(message)
    assert "\n" not in str(err.value)


def test_building_an_attack_hints(toys) -> None:
    with pytest.raises(PluginError) as err:
        build("attack", "toy-attack", parse_pairs(["bogus=1"], "--param"))
    assert str(err.value.hint).startswith("toy-attack takes: eps=8.0, budget=50") and "steps=3" in str(err.value.hint)
    with pytest.raises(PluginError) as err:
        build("attack", "toy-attack", parse_pairs(["budget=9"], "--param"), budget=7)
    assert err.value.hint == "use --budget 9 instead"


def test_build_editor_reads_defaults_types_and_passes_other_keys_as_text(toys) -> None:
    editor = build("editor", "toy-editor", {"strength": "0.5", "flip": "yes", "size": "3,4",
                                            "guidance-scale": "7"}, backend="diffusion")
    assert editor.backend == "diffusion"
    assert editor.params == {"strength": 0.5, "flip": True, "size": (3, 4), "guidance_scale": "7"}
    spec = declared(ToyEditor)
    assert list(spec.params) == ["backend", "strength", "flip", "size"] and spec.open
    with pytest.raises(PluginError, match="'backend' of editor 'toy-editor' is set by its own option"):
        build("editor", "toy-editor", {"backend": "x"}, backend="classical")


def test_build_hands_undeclared_keys_to_an_options_parameter(toys) -> None:
    editor = build("editor", "toy-options", {"steps": "4", "sd": "/models/sd"})
    assert (editor.steps, editor.options) == (4, {"sd": "/models/sd"})
    assert build("editor", "toy-options", {}).options is None


def test_build_filter_reads_constructor_annotations(toys) -> None:
    flt = build("filter", "toy-filter", {"model": "m", "alpha": "3", "dirs": "a,b", "strict": "1"})
    assert (flt.model, flt.alpha, flt.dirs, flt.strict) == ("m", 3.0, [Path("a"), Path("b")], True)
    assert build("filter", "toy-filter", {"alpha": "auto", "model": "none"}).alpha == "auto"
    with pytest.raises(PluginError, match="unknown parameter 'beta' for filter 'toy-filter'"):
        build("filter", "toy-filter", {"beta": "1"})
    with pytest.raises(PluginError, match="^the constructor of filter 'toy-filter' failed: "
                                          "ValueError: alpha must be"):
        build("filter", "toy-filter", {"alpha": "bad"})


@pytest.mark.parametrize("how,raised", [
    ("attribute", "AttributeError: 'CrashingFilter' object has no attribute 'model'"),
    ("none", "TypeError: object of type 'NoneType' has no len()"),
    ("other", "RuntimeError: weights file vanished"),
    ("exit", "SystemExit: 3 (the plugin tried to end segtk)"),
])
def test_a_constructor_that_fails_is_named_not_called_bad_parameters(toys, how, raised) -> None:
    """Only values the constructor cannot take are bad parameters; what its own code raises
    is its failure, named with the exception (a TypeError inside it too)."""
    with pytest.raises(PluginError) as err:
        build("filter", "toy-crashing", {"how": how})
    assert err.value.message == f"the constructor of filter 'toy-crashing' failed: {raised}"
    assert str(err.value.hint).startswith("toy-crashing takes: how=attribute; if these values are right, "
                                     "this is a bug in filter 'toy-crashing'")


def test_values_the_constructor_cannot_take_are_bad_parameters(toys) -> None:
    with pytest.raises(PluginError) as err:
        build("filter", "toy-filter", {}, colour="red")  # a shared value it does not take
    assert err.value.message.startswith("bad parameters for filter 'toy-filter': ")
    assert "unexpected keyword argument 'colour'" in err.value.message


# --- typed lookups ----------------------------------------------------------------------------


def test_typed_lookups_return_the_registered_objects(toys) -> None:
    assert registry.attack("toy-attack") is ToyAttack
    assert registry.editor("toy-editor") is ToyEditor
    assert registry.filter_("toy-filter") is ToyFilter


@pytest.fixture
def impostors():
    """Registrations of the wrong type, one per kind."""
    plugin = types.SimpleNamespace(
        register_attacks=hookimpl(lambda register: register(ToyFilter.__new__(ToyFilter))),
        register_editors=hookimpl(lambda register: register(ToyAttack)),
        register_filters=hookimpl(lambda register: register(NotAFilter)),
        register_models=hookimpl(lambda register: register(
            types.SimpleNamespace(name="fake-model", load=lambda arg: None))),
        register_datasets=hookimpl(lambda register: register(
            SegmenterPlugin("fake-data", lambda arg: None, "fake-data", "--data fake-data"))),
    )
    reset_plugin_manager()
    get_plugin_manager().register(plugin, name="segtk-impostors")
    registry.reset()
    yield
    reset_plugin_manager()


@pytest.mark.parametrize("lookup,name,expected", [
    (registry.attack, "toy-filter", "a subclass of Attack"),
    (registry.editor, "toy-attack", "a subclass of Editor"),
    (registry.filter_, "not-a-filter", "a subclass of Filter"),
    (registry.segmenter_plugin, "fake-model", "an instance of SegmenterPlugin"),
    (registry.dataset_plugin, "fake-data", "an instance of DatasetPlugin"),
])
def test_a_registration_of_the_wrong_type_is_refused_naming_the_plugin(impostors, lookup, name,
                                                                       expected) -> None:
    with pytest.raises(PluginError) as err:
        lookup(name)
    assert f"plugin {name!r} from (registered object) (plugin segtk-impostors) registered" in err.value.message
    assert err.value.message.endswith(f"which is not {expected}")
    assert "hook" in str(err.value.hint)

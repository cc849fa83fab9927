"""Plugin parameters from text: one converter, one `KEY=VALUE` reader, one declaration of what
a plugin takes.

Every value a user types (`--param k=v`, `--filter-param f.k=v`, spec options such as
`hf:org/m,size=64x32`, `--augment cutmix:alpha=1`) is read by `parse_pairs` and `convert`,
so the same text means the same value everywhere and a mistake is one line naming the key,
the value and what was expected. `declared(cls)` says what a plugin class takes, reading each
parameter as the type the plugin declares:

- a `Params` dataclass (attacks, edit backends): its fields (annotations);
- anything else (editors, filters, augmenters, prompt writers): the constructor's named
  parameters (their annotations, else their defaults' types), plus the entries of a `defaults`
  dict (the knobs an attribute editor or augmenter takes through `**params`), read as each
  default's type.

`Declared.read` reads a plugin's parameters and refuses an unknown key with the one error
every kind shares (`unknown_parameter`); `segtk.core.build` (core/_build.py) builds any kind
with it.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import inspect
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from segtk.core._errors import PluginError, SegtkError

__all__ = ["TRUE", "FALSE", "NONE", "convert", "kind_of", "describe", "parse_pairs",
           "Declared", "declared", "unknown_parameter"]

TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off")
NONE = ("none", "null")

_NAMES = {bool: ("true or false", "true/false values"), int: ("an integer", "integers"),
          float: ("a number", "numbers"), str: ("text", "texts"), Path: ("a path", "paths")}


def kind_of(default: Any) -> Any:
    """The type a parameter with this default is read as (None: Any, read as a literal)."""
    if default is None:
        return Any
    if isinstance(default, list):  # list[X] and tuple[X, Y] built at run time
        return types.GenericAlias(list, (kind_of(default[0]) if default else str,))
    if isinstance(default, tuple):
        items = tuple(kind_of(v) for v in default) if default else (str, ...)
        return types.GenericAlias(tuple, items)
    if isinstance(default, Path):
        return Path
    return type(default)


def _optional(kind: Any) -> tuple[list[Any], bool]:
    """The members of a union (or [kind]) and whether None is one of them."""
    if get_origin(kind) in (Union, types.UnionType):
        members = list(get_args(kind))
        return [m for m in members if m is not type(None)], type(None) in members
    return [kind], False


def describe(kind: Any, sep: str = ",") -> str:
    """What `convert` expects for `kind`, in words: 'a number', '3 numbers separated by ";"'."""
    members, optional = _optional(kind)
    if len(members) > 1 or optional:
        words = " or ".join(describe(m, sep) for m in members)
        return f"{words} or none" if optional else words
    if kind in (Any, object):
        return "a value"
    if kind in _NAMES:
        return _NAMES[kind][0]
    origin, args = get_origin(kind), get_args(kind)
    if origin is Literal:
        return "one of " + ", ".join(str(a) for a in args)
    if origin in (list, tuple):
        fixed = origin is tuple and args and args[-1] is not Ellipsis
        if fixed and len(set(args)) == 1 and args[0] in _NAMES:
            return f"{len(args)} {_NAMES[args[0]][1]} separated by {sep!r}"
        if fixed:
            return f"{len(args)} values separated by {sep!r}"
        item = args[0] if args else str
        return f"a list of {_NAMES.get(item, ('', 'values'))[1]} separated by {sep!r}"
    return getattr(kind, "__name__", str(kind))


def convert(raw: Any, kind: Any, key: str = "value", *, sep: str = ",",
            error: type[SegtkError] = SegtkError, hint: str | None = None) -> Any:
    """`raw` text read as `kind`: bool, int, float, str, Path, list[X], tuple[X, ...],
    tuple[X, Y], Literal[...], X | None ('none'), unions (first member that reads), or
    Any (a Python literal if it is one, else the text). Items of lists and tuples are
    separated by `sep`. A value that is not text is returned as it is (already typed).

    A value that cannot be read is an `error` naming the key, the value and what was expected.
    """
    if not isinstance(raw, str):
        return raw
    try:
        return _convert(raw.strip(), kind, sep)
    except (ValueError, TypeError, SyntaxError):
        pass
    raise error(f"cannot read {key}={raw!r}: expected {describe(kind, sep)}", hint=hint)


def _convert(text: str, kind: Any, sep: str) -> Any:
    members, optional = _optional(kind)
    if optional and text.lower() in NONE:
        return None
    if len(members) > 1:
        for member in members:
            try:
                return _convert(text, member, sep)
            except (ValueError, TypeError, SyntaxError):
                continue
        raise ValueError(text)
    kind = members[0]
    if kind in (Any, object):
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return text
    if kind is str:
        return text
    if kind is bool:
        if text.lower() in TRUE:
            return True
        if text.lower() in FALSE:
            return False
        raise ValueError(text)
    if kind is int:
        return int(text)
    if kind is float:
        return float(text)
    if kind is Path:
        if not text:
            raise ValueError("empty path")
        return Path(text).expanduser()
    origin, args = get_origin(kind), get_args(kind)
    if origin is Literal:
        for choice in args:
            if text == str(choice):
                return choice
        raise ValueError(text)
    if origin in (list, tuple):
        parts = [p.strip() for p in text.split(sep)]
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(parts) != len(args):
                raise ValueError(text)
            return tuple(_convert(p, a, sep) for p, a in zip(parts, args, strict=True))
        item = args[0] if args else str
        values = [_convert(p, item, sep) for p in parts if p]
        return tuple(values) if origin is tuple else values
    raise TypeError(f"parameters of type {kind!r} cannot be read from text")


def parse_pairs(items: Iterable[str], what: str, allowed: Iterable[str] | None = None,
                flags: Iterable[str] = (), *, error: type[SegtkError] = SegtkError,
                hint: str | None = None) -> dict[str, str]:
    """`KEY=VALUE` items -> {KEY: VALUE} (both stripped; values stay text, see `convert`).

    `allowed` limits the keys (None: any); a key in `flags` may stand alone (`bgr`), meaning
    'true'. An item without '=', an unknown or a repeated key is an `error` naming the item
    and the keys `what` (e.g. '--param', 'hf option') takes; `hint` (e.g. the syntax) is added.
    """
    flag_list = list(flags)
    flag_set = set(flag_list)
    keys = None if allowed is None else [*allowed, *(f for f in flag_list if f not in allowed)]
    known = None if keys is None else "allowed: " + (
        ", ".join(k if k in flag_set else f"{k}=" for k in keys) or "none")
    if hint:
        known = f"{known}; {hint}" if known else hint
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep and key in flag_set:
            value = "true"
        elif not sep or not key:
            raise error(f"cannot read {what} {item!r}: expected KEY=VALUE",
                        hint=known or f"write {what} KEY=VALUE")
        if keys is not None and key not in keys:
            raise error(f"unknown {what} {key!r}" + (f" in {item!r}" if item.strip() != key else ""),
                        hint=known)
        if key in out:
            raise error(f"{what} {key!r} is given twice ({key}={out[key]!r} and {item!r})",
                        hint="give each key once")
        out[key] = value.strip()
    return out


# --- building plugins -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Declared:
    """What a plugin class says it takes: parameter -> (kind, default), and whether it also
    takes keys it does not declare (`**kwargs`: they are passed on as text)."""

    params: dict[str, tuple[Any, Any]]
    open: bool = False

    @classmethod
    def of_defaults(cls, defaults: Mapping[str, Any]) -> Declared:
        """The knobs of a `defaults` dict, each read as the type of its default."""
        return cls({k: (kind_of(v), v) for k, v in defaults.items()})

    def takes(self, name: str) -> str:
        """'dla takes: eps=8.0, budget=50, ...': the hint of every parameter error."""
        return f"{name} takes: " + (", ".join(f"{k}={d}" for k, (_, d) in self.params.items())
                                    or "no parameters")

    def read(self, params: Mapping[str, Any], kind: str, name: str) -> dict[str, Any]:
        """`params` (text, or values already typed) read as the declared types ('-' in keys
        reads as '_'); a key not declared is `unknown_parameter`, the one error of every kind."""
        out: dict[str, Any] = {}
        for raw_key, raw in params.items():
            key = raw_key.strip().replace("-", "_")
            if key not in self.params:
                raise unknown_parameter(raw_key, kind, name, self)
            out[key] = convert(raw, self.params[key][0], key, error=PluginError,
                               hint=self.takes(name))
        return out


def unknown_parameter(key: str, kind: str, name: str, spec: Declared) -> PluginError:
    """The one error for a key a plugin does not declare, whatever its kind: it names the key,
    the plugin, the closest declared key and (the hint) every key it takes with its default."""
    close = difflib.get_close_matches(key.strip().replace("-", "_"), list(spec.params), n=1)
    guess = f" (did you mean {close[0]!r}?)" if close else ""
    return PluginError(f"unknown parameter {key!r} for {kind} {name!r}{guess}",
                       hint=spec.takes(name))


def _hints(obj: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(obj)
    except Exception:  # an annotation naming something only imported for type checking
        return {}


def declared(cls: type) -> Declared:
    """The parameters of a plugin class (see the module docstring for where they come from)."""
    params_cls = getattr(cls, "Params", None)
    if dataclasses.is_dataclass(params_cls) and isinstance(params_cls, type):
        hints = _hints(params_cls)
        defaults = params_cls()
        return Declared({f.name: (hints.get(f.name, kind_of(getattr(defaults, f.name))),
                                  getattr(defaults, f.name))
                         for f in dataclasses.fields(params_cls) if f.init})
    try:  # annotations as types (`from __future__ import annotations` leaves them text)
        signature = inspect.signature(cls, eval_str=True)
    except Exception:  # one names something only imported for type checking: use defaults
        signature = inspect.signature(cls)
    open_ = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
    out: dict[str, tuple[Any, Any]] = {}
    for name, p in signature.parameters.items():
        if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
            continue
        default = None if p.default is p.empty else p.default
        typed = p.annotation is not p.empty and not isinstance(p.annotation, str)
        out[name] = (p.annotation if typed else kind_of(default), default)
    defaults_dict = getattr(cls, "defaults", None)
    if isinstance(defaults_dict, dict):  # the knobs it takes through **params
        out.update({k: (kind_of(v), v) for k, v in defaults_dict.items()})
    return Declared(out, open_)

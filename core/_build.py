"""One way to build a plugin of any class kind from the user's text: `build(kind, name, params)`.

The registered class (checked against its kind's base, core/_kinds.py) says what it takes
(`declared`, core/_params.py); each value is read as that type, an unknown key is refused with
the one error every kind shares, and the kind's row says how the class is constructed (keyword
arguments, or one options dict for edit backends). `shared` values (an attack's budget, an
editor's backend, a prompt writer's model) are set by their own options and are passed as they
are; naming one in the text parameters is an error.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Mapping
from typing import Any

from segtk.core import _registry as registry
from segtk.core._errors import PluginError, SegtkError, failure
from segtk.core._kinds import kind as kind_named
from segtk.core._params import Declared, declared, parse_pairs, unknown_parameter
from segtk.core._training import Augmenter

NO_AUGMENTATION = ("baseline", "none")


def build(kind: str, name: str, params: Mapping[str, Any] | None = None, **shared: Any) -> Any:
    """The registered `kind` plugin `name`, constructed with `params` (text, read as the
    types the plugin declares; '-' in keys reads as '_') and the `shared` settings.

    A constructor with `**kwargs` receives the keys it does not declare as text (it checks them
    itself: an attribute editor or augmenter its `defaults`); one with an `options` parameter
    receives them there (e.g. an editor handing them to its backend). Loader kinds (segmenters,
    datasets) read their own spec: they are not built here.
    """
    row = kind_named(kind)
    if row.build is None:
        raise PluginError(f"{kind} plugins are loaders, built from their spec",
                          hint=f"use load_{kind}(SPEC)")
    cls = registry.plugin_class(kind, name)
    spec = declared(cls)
    label = f"{kind} {name!r}"
    own: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    for raw_key, raw in (params or {}).items():
        key = raw_key.strip().replace("-", "_")
        if key in shared:  # one value, one place: --param must not silently override --budget
            raise PluginError(f"parameter {key!r} of {label} is set by its own option",
                              hint=f"use --{key.replace('_', '-')} {raw} instead")
        if key in spec.params and key != "options":
            own[raw_key] = raw
        elif spec.open or "options" in spec.params:
            rest[key] = raw
        else:
            raise unknown_parameter(raw_key, kind, name, spec)
    values = {**shared, **spec.read(own, kind, name)}
    if rest and spec.open:
        values.update(rest)
    elif rest:
        values["options"] = rest
    try:
        return row.build(cls, values)
    except (SegtkError, ImportError):  # the plugin's own refusal of a value, with its hint; a
        raise  # dependency it imports and lacks, which its caller names (edit backends)
    except (Exception, SystemExit) as exc:  # (a plugin does not get to end segtk either)
        if isinstance(exc, TypeError) and _raised_by_the_call(exc, row.build):
            raise PluginError(f"bad parameters for {label}: {exc}", hint=spec.takes(name)) from exc
        source = registry.origin(kind, cls)
        raise PluginError(
            f"the constructor of {label} failed: {failure(exc)}",
            hint=f"{spec.takes(name)}; if these values are right, this is a bug in {label}"
                 + (f" from {source}" if source else "") + ": report it to its authors "
                 "(see `segtk plugins`)") from exc


def _raised_by_the_call(exc: TypeError, construct: Callable[..., Any]) -> bool:
    """Whether `exc` was raised calling the constructor (the values do not fit its signature:
    a parameter problem), not by code inside it (the plugin's failure): its traceback ends in
    the kind's `construct` function, without a frame of the plugin's own code."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code is getattr(construct, "__code__", None)


def split_params(text: str, name: str = "augmenter") -> dict[str, str]:
    """'alpha=1,p=0.5' -> {'alpha': '1', 'p': '0.5'}; a part without '=' is an error."""
    return parse_pairs([p for p in text.split(",") if p.strip()], f"--augment {name} option",
                       error=PluginError,
                       hint="write NAME:key=value,key=value, e.g. cutmix:alpha=1")


def parse_augment(spec: str) -> tuple[str, dict[str, str]]:
    """'cutmix:alpha=1' -> ('cutmix', {'alpha': '1'})."""
    name, _, rest = spec.strip().partition(":")
    if not name.strip():
        raise PluginError("empty --augment", hint="e.g. --augment cutmix or --augment baseline")
    return name.strip().lower(), split_params(rest, name.strip().lower())


def build_augmenter(spec: str) -> Augmenter | None:
    """The augmenter a spec names (None for baseline), built by `build`."""
    name, params = parse_augment(spec)
    if name in NO_AUGMENTATION:
        if params:
            raise unknown_parameter(next(iter(params)), "augmenter", name, Declared({}))
        return None
    return typing.cast(Augmenter, build("augmenter", name, params))

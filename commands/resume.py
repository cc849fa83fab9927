"""`--resume` and `--table-only` take the options a user leaves out from OUT/run.json.

Each command declares, next to itself, where run.json's config records each of its settings
(a `Recorded` per option) and wraps its function in `resumable`. When it resumes a run (or
reads its table), the wrapper

- sets every declared option the command line left at its default (click's parameter
  source) to the recorded value. A key the config lacks (a run made before that setting
  existed, or one that records it only when it is set) means what `Recorded.absent` says, or
  leaves the option at its default: what that run used;
- refuses a declared option the command line set to another value than the recorded one, in
  one line naming the option, the recorded and the given value, unless the command lets it
  change on resume (`may_change`, e.g. `train --epochs`).

The wrapper also gives each such command `--overwrite` (jobs.overwrite.start_over): the run
in OUT is cleared before the command starts, refused together with --resume (or --table-only).

Options that are not settings (--workers, --chunk, --report, ...) are not declared, so they
may differ freely. The run's own check (storage.runs.RunDir, which compares the whole config)
stays the last word: it refuses what the options cannot say (e.g. a `--param` of another
value, an editor's canonical spelling of a value).
"""

from __future__ import annotations

import functools
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from segtk.commands.options import csv_list
from segtk.core import SegtkError
from segtk.jobs.overwrite import refuse_with_resume, start_over
from segtk.storage import layout
from segtk.storage.runs import load_run_file

__all__ = ["Recorded", "resumable", "resumed_params", "joined", "pairs", "as_text", "sized",
           "csv_or_none"]


def _itself(value: Any) -> Any:
    return value


_UNKNOWN = object()


@dataclass(frozen=True)
class Recorded:
    """Where run.json's config records one option's setting.

    key: the config key, dotted into nested settings ("params.budget").
    read: the recorded value as the option's value (what click would pass the command).
    same: a form of the option's value that is equal exactly when the settings are (e.g. a
        comma list as a list), or None where only the command's own config check can tell
        (then an explicit value is left to storage.runs.RunDir).
    absent: what a config without `key` recorded, for keys written only when set (e.g.
        classes_from_data: False); by default such a run leaves the option alone.
    """

    key: str
    read: Callable[[Any], Any] = _itself
    same: Callable[[Any], Any] | None = _itself
    absent: Any = _UNKNOWN


def as_text(value: Any) -> str:
    """A recorded value as text that core.convert reads back to it, as its declared type
    or as a Python literal (untyped parameters): True, None, items joined by ','."""
    if isinstance(value, bool | None):
        return str(value)
    if isinstance(value, list | tuple):
        return ",".join(as_text(v) for v in value)
    if isinstance(value, float):
        return repr(value)
    return str(value)


def joined(value: Any) -> str | None:
    """A recorded list as a comma-separated option (None stays None)."""
    return None if value is None else ",".join(as_text(v) for v in value)


def pairs(value: Mapping[str, Any], prefix: str = "") -> tuple[str, ...]:
    """Recorded parameters as repeatable KEY=VALUE items (nested dicts as PREFIX.KEY=VALUE)."""
    items: list[str] = []
    for key, v in value.items():
        if isinstance(v, dict):
            items += pairs(v, f"{prefix}{key}.")
        else:
            items.append(f"{prefix}{key}={as_text(v)}")
    return tuple(items)


def sized(value: Sequence[int] | None) -> str | None:
    """A recorded [W, H] as the WxH an option takes."""
    return None if value is None else f"{value[0]}x{value[1]}"


def csv_or_none(value: str | None) -> list[str] | None:
    """A comma-separated option as its list (None stays None)."""
    return None if value is None else csv_list(value)


def _lookup(config: Mapping[str, Any], key: str) -> Any:
    value: Any = config
    for part in key.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return _UNKNOWN
        value = value[part]
    return value


def _explicit(ctx: click.Context, name: str) -> bool:
    source = ctx.get_parameter_source(name)
    return source not in (None, ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP)


def _number(value: float) -> str:
    short = f"{value:g}"
    return short if float(short) == value else repr(value)


def shown(param: click.Parameter, value: Any) -> str:
    """An option with a value as a user would type it: `--seed 4`, `--things-only`,
    `no --time-limit`, `--model a --model b`."""
    name = param.opts[0]
    if isinstance(param, click.Option) and param.is_bool_flag:
        if value:
            return name
        return param.secondary_opts[0] if param.secondary_opts else f"no {name}"
    if value is None or (isinstance(value, tuple) and not value):
        return f"no {name}"
    if isinstance(value, tuple):
        return " ".join(shown(param, v) for v in value)

    def text(v: Any) -> str:
        return _number(v) if isinstance(v, float) else str(v)

    words = ",".join(text(v) for v in value) if isinstance(value, list) else text(value)
    return f"{name} {shlex.quote(words)}"


def resumed_params(ctx: click.Context, params: dict[str, Any], config: Mapping[str, Any],
                   settings: Mapping[str, Recorded], folder: str | Path,
                   may_change: Sequence[str] = ()) -> dict[str, Any]:
    """`params` with every option the command line left out read from `config` (run.json's),
    after refusing an explicit option that conflicts with it (see the module doc)."""
    out = dict(params)
    by_name = {p.name: p for p in ctx.command.params}
    for name, where in settings.items():
        recorded = _lookup(config, where.key)
        if recorded is _UNKNOWN:
            recorded = where.absent
            if recorded is _UNKNOWN:
                continue
        value = where.read(recorded)
        if not _explicit(ctx, name):
            out[name] = value
        elif name not in may_change and where.same is not None \
                and where.same(params[name]) != where.same(value):
            param = by_name[name]
            raise SegtkError(f"{folder} holds a run with {shown(param, value)}, not "
                             f"{shown(param, params[name])}",
                             hint=f"leave {param.opts[0]} out to resume with the recorded value, "
                                  "or choose another --out")
    return out


def no_run(folder: str | Path, flag: str) -> SegtkError:
    """`--resume` (or `--table-only`) on a folder holding no run: refused rather than starting
    a new run there (a mistyped --out would silently start the default one)."""
    if flag != "resume":
        return SegtkError(f"{folder} holds no run to read: it has no {layout.RUN}",
                          hint="check --out (the folder the run writes to)")
    return SegtkError(f"{folder} holds no run to resume: it has no {layout.RUN}",
                      hint="check --out (the folder the run was started with), or leave out "
                           "--resume to start a new run there")


def resumable(kind: str, settings: Mapping[str, Recorded],
              out: Callable[[dict[str, Any]], str | None] = lambda p: p["out"], *,
              flags: Sequence[str] = ("resume",), may_change: Sequence[str] = (),
              required: Sequence[str] = ()) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Wrap a command's function (below its click options) so that, when one of `flags` is
    set and OUT (`out` of the options) holds a run.json of this `kind`, the options the user
    left out are that run's (`resumed_params`). `required` options must then have a value,
    from the command line or the record."""

    def wrap(command: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(command)
        def run(**params: Any) -> Any:
            ctx = click.get_current_context()
            overwrite = params.pop("overwrite")
            flag = next((f for f in flags if params.get(f)), None)
            if overwrite and flag:
                raise refuse_with_resume(resume="--" + flag.replace("_", "-"))
            folder = out(params) if flag else None
            record = load_run_file(Path(folder) / layout.RUN) if folder else None
            if flag and folder and record is None:
                raise no_run(folder, flag)
            if folder and record is not None and record.get("kind", kind) == kind:  # another kind: RunDir says so
                params = resumed_params(ctx, params, record.get("config", {}), settings, folder,
                                        may_change)
            for name in required:
                if params.get(name) is None:
                    param = next(p for p in ctx.command.params if p.name == name)
                    raise click.MissingParameter(ctx=ctx, param=param)
            if overwrite:
                folder = out(params)
                if folder:
                    start_over(folder, kind)
            return command(**params)

        return overwrite_option(run)

    return wrap


overwrite_option = click.option(
    "--overwrite", is_flag=True,
    help=f"Start over: first remove what an earlier run of this command wrote in OUT "
         f"({layout.RUN}, results, pictures, tables, report); other files there are kept, and a "
         f"folder without {layout.RUN} is refused. Not with --resume.")

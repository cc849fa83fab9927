"""`segtk plugins`: what is installed, broken, missing a dependency or in conflict; `segtk
plugins show NAME`: one plugin's kind, distribution, parameters and an example."""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
from collections.abc import Iterable
from typing import Any, get_args

import click

from segtk.commands.attack import attack as attack_command
from segtk.commands.console import console, shell_safe, status_text, table
from segtk.commands.edit import edit as edit_command
from segtk.commands.extras import Extra, extra_of, not_installed
from segtk.commands.plugin_commands import add_commands
from segtk.commands.scaffold import KindChoice, new
from segtk.core import AttackParams, declared, registry
from segtk.core._errors import UnknownPlugin
from segtk.core._registry import PluginInfo


@click.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def plugins(ctx: click.Context, as_json: bool) -> None:
    """List installed plugins with their status.

    \b
    Examples:
      segtk plugins
      segtk plugins --json
      segtk plugins show dla               # kind, parameters (type, default, meaning), example
      segtk plugins new attack my-noise    # scaffold a plugin (docs/write-a-plugin.md)
    """
    if ctx.invoked_subcommand is not None:
        return
    infos = listing(ctx)
    extras = extra_of()
    rows: list[dict[str, Any]] = [
        {"name": i.name, "kind": i.kind, "distribution": i.distribution, "version": i.version,
         "status": i.status, "missing": ", ".join(i.missing), **install_of(i, extras),
         "error": i.error or i.conflict,
         "hook": i.hook, **({"white_box": True} if white_box(i) else {})}
        for i in infos
    ]
    rows += [{"name": ", ".join(m.entry_points) or m.distribution, "kind": "", "version": "",
              "distribution": m.distribution, "status": "not installed", "missing": "",
              "install": m.extra.install, "extra": m.extra.name, "error": "", "hook": ""}
             for m in not_installed()]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    console.print(table(
        "segtk plugins", ["name", "kind", "distribution", "version", "status",
                          "missing / error / install"],
        [[r["name"], r["kind"] + (" (white-box)" if r.get("white_box") else ""), r["distribution"],
          r["version"], status_text(r["status"]), r["error"] or (
              f"{r['missing']}: {r['install']}" if r["missing"] else r["install"])]
         for r in rows], fold=True,
    ))


def install_of(info: PluginInfo, extras: dict[str, Extra]) -> dict[str, str]:
    """What installs a plugin's missing dependency: the plugin's own hint (it knows its stack
    best, e.g. a separate virtualenv), else the extra its distribution belongs to, else its
    modules by name ({"install": ""} for a plugin that lacks nothing)."""
    if not info.missing:
        return {"install": ""}
    extra = extras.get(info.distribution)
    named = {"extra": extra.name} if extra is not None else {}
    if info.install:
        return {"install": info.install, **named}
    if extra is not None:
        return {"install": extra.install, **named}
    return {"install": "pip install " + " ".join(info.missing)}


def listing(ctx: click.Context) -> list[PluginInfo]:
    """Every plugin imported and listed, the commands they add to the CLI included."""
    root = ctx.find_root().command
    if isinstance(root, click.Group):
        add_commands(root)
    return registry.plugins()


@plugins.command("show")
@click.argument("name")
@click.option("--kind", type=KindChoice([k.name for k in registry.KINDS] + ["command"]), default=None,
              help="Only the plugin of this kind (a name may be, e.g., a model and a dataset).")
@click.option("--json", "as_json", is_flag=True,
              help="Machine-readable: a list with one object per plugin of that name.")
@click.pass_context
def show(ctx: click.Context, name: str, kind: str | None, as_json: bool) -> None:
    """One plugin: kind, distribution, version, status, parameters (name, type, default,
    meaning) and an example command.

    \b
    Examples:
      segtk plugins show dla
      segtk plugins show square --json
      segtk plugins show demo --kind dataset
    """
    everything = listing(ctx)
    infos = [i for i in everything if i.name == name and kind in (None, i.kind)]
    if not infos:
        what = f"{kind} plugin" if kind else "plugin"
        known = [i.name for i in everything if kind in (None, i.kind)]
        raise UnknownPlugin(f"no {what} named {name!r}{did_you_mean(name, known)}",
                            hint="`segtk plugins` lists every installed plugin", name=name)
    shown = [details(i) for i in infos]
    if as_json:
        click.echo(json.dumps(shown, indent=2, default=str))
        return
    for i, d in enumerate(shown):
        if i:
            console.print()
        print_details(d)


plugins.add_command(new)  # segtk plugins new KIND NAME


WHITE_BOX = ("reads the gradients of the model's logits (budget: forward and backward passes "
             "per image); runs only on models whose adapter gives them; tabled apart from the "
             "decision-based attacks")


def white_box(info: PluginInfo) -> bool:
    """A white-box attack (`Attack.white_box`): marked wherever attacks are listed."""
    return info.kind == "attack" and bool(getattr(info.obj, "white_box", False))


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """' (did you mean 'dla'?)' for a mistyped name, '' when nothing is close."""
    close = difflib.get_close_matches(name, sorted(set(known)), n=3)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""


# the command whose options set a kind's shared parameters (budget, backend, ...)
OPTIONS_OF = {"attack": attack_command, "editor": edit_command}


def details(info: PluginInfo) -> dict[str, Any]:
    """What `segtk plugins show` prints about one registration (its --json object); its
    example commands are quoted for a shell."""
    out = _details(info)
    if out.get("example"):
        out["example"] = shell_safe(out["example"])
    if "examples" in out:
        out["examples"] = [shell_safe(line) for line in out["examples"]]
    return out


def _details(info: PluginInfo) -> dict[str, Any]:
    out: dict[str, Any] = {"name": info.name, "kind": info.kind, "distribution": info.distribution,
                           "version": info.version, "status": info.status}
    if info.error or info.conflict:
        out["error"] = info.error or info.conflict
    if info.missing:
        out.update(missing=info.missing, install=info.install)
    obj = info.obj
    row = registry.BY_NAME.get(info.kind)
    if row is not None and not row.is_class and obj is not None:  # a loader: its spec
        out.update(description=obj.description, syntax=obj.syntax, example=obj.example)
        if info.kind == "model":
            out["classes"] = ("classes=a;b;c: read by the adapter" if obj.reads_classes else
                              "classes=a;b;c: read by segtk (renames the outputs; count checked)")
        out["examples"] = spec_examples(info.kind, obj.example)
        return out
    if info.kind == "command":
        out.update(description=(getattr(obj, "help", "") or "").strip().split("\n")[0],
                   examples=[f"segtk {info.name} --help"])
        return out
    if not isinstance(obj, type):
        return out
    out["description"] = describe_class(obj)
    if white_box(info):
        out["white_box"] = WHITE_BOX
    out["parameters"] = parameters(info)
    out["examples"] = examples(info, out["parameters"])
    return out


def spec_examples(kind: str, example: str) -> list[str]:
    """Commands using a model or dataset plugin, from its registered `--model X` / `--data X`."""
    if kind == "dataset":
        spec = example.removeprefix("--data").strip()
        return [f"segtk predict {example}", f"segtk datasets {spec}"]
    out = [f"segtk predict {example}", f"segtk attack --plugin dla {example}"]
    if "classes=" not in example:
        spec = example.removeprefix("--model").strip()
        joined = spec + ("," if ":" in spec.removeprefix("http://").removeprefix("https://") else ":")
        out.append(f"segtk predict --model {joined}classes=a;b;c --data folder:DATA")
    return out


def describe_class(cls: type) -> str:
    """A plugin class's `description`, else its docstring's first line."""
    text = getattr(cls, "description", "") or (cls.__doc__ or "").strip()
    return text.strip().split("\n")[0]


def parameters(info: PluginInfo) -> list[dict[str, Any]]:
    """Each declared parameter: name, type, default, one-line meaning, how to set it."""
    cls = info.obj
    docs = param_docs(cls)
    options = {p.name: p for p in OPTIONS_OF[info.kind].params} if info.kind in OPTIONS_OF else {}
    row = registry.BY_NAME.get(info.kind)
    pattern = row.set_with if row is not None else ""
    rows = []
    for key, (kind, default) in declared(cls).params.items():
        option = options.get(key)
        if option is not None and isinstance(option, click.Option):  # a shared setting
            set_with, doc = option.opts[0], docs.get(key) or (option.help or "").split(". ")[0]
        else:
            set_with, doc = pattern.format(key=key, name=info.name), docs.get(key, "")
        rows.append({"name": key, "type": type_name(kind), "default": _plain(default),
                     "doc": doc.rstrip("."), "set_with": set_with})
    return rows


def _plain(value: Any) -> Any:
    """A default as JSON holds it (tuples as lists, paths as text)."""
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def examples(info: PluginInfo, params: list[dict[str, Any]]) -> list[str]:
    """Commands that use the plugin with one of its own parameters (at its default)."""
    shared = {f.name for f in dataclasses.fields(AttackParams)}
    own = [p for p in params if p["name"] not in shared and "VALUE" in p["set_with"]]
    first = own[0] if own else None
    value = "VALUE" if first is None or first["default"] is None else _shown(first["default"])
    name = info.name
    key = f"{first['name']}={value}" if first else ""
    if info.kind == "attack":
        return [f"segtk attack --plugin {name} --budget 50" + (f" --param {key}" if key else ""),
                f"segtk bench attacks --attacks '{name}" + (f":{key}'" if key else "'")]
    if info.kind == "editor":
        return [f"segtk edit --plugin {name}" + (f" --param {key}" if key else "")]
    if info.kind == "filter":
        return [f"segtk edit --plugin color --filter {name}" + (f" --filter-param {name}.{key}" if key else "")]
    if info.kind == "augmenter":
        return [f"segtk train --model demo --data demo --split '' --augment {name}"
                + (f":{key}" if key else "") + f" --out runs/train-{name}"]
    if info.kind == "edit-backend":
        return [f"segtk edit --plugin color --backend {name}"]
    if info.kind == "prompt-writer":
        return [f"segtk edit --plugin color --prompt-writer {name} --prompt-model MODEL_DIR"]
    if first is not None and first["default"] == "":  # a required text (a model folder)
        key = f"{first['name']}=VALUE"
    if info.kind == "metric":
        return [f"segtk bench edits --attributes color --quality {name}"
                + (f" --metric-param {name}.{key}" if key else "")]
    if info.kind == "captioner":
        return [f"segtk edit --plugin weather --captioner {name}"
                + (f" --captioner-param {key}" if key else "")]
    return []


def print_details(d: dict[str, Any]) -> None:
    """`details` as text: nothing cut at any width (long cells fold, lines wrap softly)."""
    version = f" {d['version']}" if d["version"] else ""
    console.print(f"[bold]{d['name']}[/] ({d['kind']})", soft_wrap=True)
    lines = [("distribution", f"{d['distribution']}{version}"), ("status", d["status"])]
    for key in ("error", "install", "description", "white_box", "syntax", "classes"):
        if d.get(key):
            lines.append((key.replace("_", "-"), d[key]))
    if d.get("missing"):
        lines.append(("missing", ", ".join(d["missing"])))
    for key, value in lines:
        console.print(f"  {key}: ", end="", soft_wrap=True)
        console.print(value, markup=False, soft_wrap=True, highlight=False)
    if "parameters" in d:
        if d["parameters"]:
            console.print(table("parameters", ["name", "type", "default", "set with", "meaning"],
                                [[p["name"], p["type"], _shown(p["default"]), p["set_with"], p["doc"]]
                                 for p in d["parameters"]], fold=True))
        else:
            console.print("  parameters: none")
    for line in d.get("examples", []):
        console.print("  example: ", end="", soft_wrap=True)
        console.print(line, markup=False, soft_wrap=True, highlight=False)


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return ";".join(map(str, value))
    return "none" if value is None else str(value)


# --- what `plugins show` prints of a parameter ---------------------------------------------------

def param_docs(cls: type) -> dict[str, str]:
    """A one-line meaning per declared parameter (`segtk plugins show`), taken from
    `field(metadata={"doc": ...})` of a `Params` dataclass, else from `name: meaning` entries in
    the docstrings of the Params class and its bases (of the class and its __init__ for other
    plugins): the entry's first sentence. Parameters nobody documented are left out."""
    names = list(declared(cls).params)
    params_cls = getattr(cls, "Params", None)
    sources = params_cls if dataclasses.is_dataclass(params_cls) and isinstance(params_cls, type) else cls
    texts = [k.__dict__.get("__doc__") or "" for k in reversed(sources.__mro__)]  # bases first
    if sources is cls:  # a constructor's parameters may be described where it is defined
        init = next((k.__dict__["__init__"] for k in cls.__mro__ if "__init__" in k.__dict__), None)
        texts.append(getattr(init, "__doc__", None) or "")
    docs: dict[str, str] = {}
    if names:
        alternatives = "|".join(map(re.escape, names))
        entry = re.compile(rf"(?:^|(?<=[\s;]))`?({alternatives})`?: ")
        for text in texts:
            flat = " ".join(text.split())
            found = list(entry.finditer(flat))
            for here, after in zip(found, [*found[1:], None][:len(found)], strict=True):
                docs[here.group(1)] = _first_sentence(flat[here.end():after.start() if after else None])
    if sources is params_cls:
        for f in dataclasses.fields(params_cls):
            doc = f.metadata.get("doc") or f.metadata.get("help")
            if doc:
                docs[f.name] = str(doc)
    return {name: docs[name] for name in names if docs.get(name)}


def _first_sentence(text: str) -> str:
    """Up to the first '. ' before a capital letter (so 'e.g. x' and 'Eq. 3' stay whole)."""
    end = re.search(r"\.\s+(?=[A-Z])", text)
    return (text[:end.start()] if end else text).strip().rstrip(".;,").strip()


def type_name(kind: Any) -> str:
    """A declared type as a user reads it: 'float', 'int | None', 'list[str]'."""
    if isinstance(kind, type) and not get_args(kind):
        return kind.__name__
    return re.sub(r"\b(?:[A-Za-z_]\w*\.)+([A-Za-z_]\w*)", r"\1", str(kind))  # typing.Any -> Any

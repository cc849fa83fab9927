"""`segtk plugins new KIND NAME`: a new plugin distribution that installs, registers itself and
passes segtk's contract suite for its kind from the first minute.

The files come from `scaffold_templates/` (string.Template, `$placeholders`): `common/` for
every kind, `KIND/` for the package and its tests; `__package__` in a path becomes the package.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
from dataclasses import dataclass
from pathlib import Path
from string import Template

import click

from segtk.core import SegtkError, registry
from segtk.core._kinds import renamed

# The kinds a scaffold can be: every plugin kind (segtk.core's table), each with its template
# folder, whose about.json gives the scaffold's description and usage lines.
KINDS = {kind.name: kind for kind in registry.KINDS}
NAME = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
MAX_NAME = 40
TEMPLATES = Path(__file__).resolve().parent / "scaffold_templates"


class KindChoice(click.Choice):
    """A plugin-kind argument: a former kind name (`segmenter`) is refused in one line naming
    the kind's name (`model`), not with the bare list of choices."""

    def convert(self, value: object, param: click.Parameter | None,
                ctx: click.Context | None) -> object:
        if isinstance(value, str) and renamed(value):
            self.fail(renamed(value), param, ctx)
        return super().convert(value, param, ctx)


@dataclass(frozen=True)
class About:
    """What a kind's template says about itself (scaffold_templates/KIND/about.json)."""

    description: str  # the new plugin's one-line description
    usage: str  # commands that use it, $name for its name
    module: str  # its implementation module (the template's only module but __init__)


def about(kind: str) -> About:
    folder = TEMPLATES / KINDS[kind].template
    text = json.loads((folder / "about.json").read_text())
    (module,) = [p.name.removesuffix(".py.tmpl") for p in (folder / "__package__").glob("*.py.tmpl")
                 if p.name != "__init__.py.tmpl"]
    return About(text["description"], "\n".join(text["usage"]), module)


@dataclass(frozen=True)
class Names:
    """One plugin name in each of its spellings."""

    name: str  # what users type: `--plugin my-noise`, and the entry point's name
    dist: str  # the distribution: segtk-my-noise
    package: str  # the import package: segtk_my_noise
    cls: str  # the class name stem: MyNoise


def names(name: str) -> Names:
    """The spellings of `name`, or a SegtkError saying what a plugin name may be."""
    if not NAME.fullmatch(name) or len(name) > MAX_NAME:
        raise SegtkError(f"{name!r} cannot be a plugin name",
                         hint=f"use lowercase letters, digits and single hyphens, starting with "
                              f"a letter, at most {MAX_NAME} characters (e.g. my-noise)")
    if name == "segtk" or name.startswith("segtk-"):
        raise SegtkError(f"{name!r}: leave out the segtk- prefix, it is added for you",
                         hint="e.g. NAME my-noise makes the distribution segtk-my-noise")
    return Names(name, f"segtk-{name}", "segtk_" + name.replace("-", "_"),
                 "".join(part.capitalize() for part in name.split("-")))


def taken(name: str) -> list[str]:
    """What already uses `name` here: an installed plugin of any kind (or an entry point) of
    that name, an importable package segtk_NAME, a distribution segtk-NAME. A scaffold that
    reuses one would shadow it, or be refused as a conflict once installed."""
    n = names(name)
    found = sorted({f"{i.kind} plugin {i.name!r} ({i.distribution})" for i in registry.plugins()
                    if name in (i.name, i.plugin)})
    try:
        if importlib.util.find_spec(n.package) is not None:
            found.append(f"package {n.package}")
    except (ImportError, ValueError):
        pass
    try:
        found.append(f"distribution {importlib.metadata.distribution(n.dist).name}")
    except importlib.metadata.PackageNotFoundError:
        pass
    return found


def check_free(name: str) -> None:
    """Refuse a name `taken` says is in use, suggesting a free one."""
    found = taken(name)
    if not found:
        return
    free = next((c for c in (f"my-{name}", f"{name}-2", f"{name}-3", f"{name}-x")
                 if NAME.fullmatch(c) and len(c) <= MAX_NAME and not taken(c)), None)
    raise SegtkError(f"the name {name!r} is taken: {', '.join(found)} already installed",
                     hint=(f"choose another NAME, e.g. {free}" if free else "choose another NAME")
                     + " (`segtk plugins` lists the names in use)")


def template_files(kind: str) -> list[tuple[Path, Path]]:
    """(template file, its path relative to the new folder), common files first."""
    files = []
    for folder in (TEMPLATES / "common", TEMPLATES / KINDS[kind].template):
        for path in sorted(folder.rglob("*.tmpl")):
            files.append((path, path.relative_to(folder).with_suffix("")))
    return files


def render(kind: str, name: str) -> dict[Path, str]:
    """The new plugin's files (relative path -> text), nothing written yet."""
    if kind not in KINDS:
        raise SegtkError(renamed(kind) or f"unknown plugin kind {kind!r}",
                         hint=f"kinds: {', '.join(KINDS)}")
    n, k, a = names(name), KINDS[kind], about(kind)
    values = {"name": n.name, "dist": n.dist, "package": n.package, "cls": n.cls, "kind": kind,
              "module": a.module, "suite": k.suite, "hook": k.hook,
              "description": a.description, "usage": Template(a.usage).substitute(name=n.name)}
    files = {}
    for template, relative in template_files(kind):
        target = Path(str(relative).replace("__package__", n.package))
        files[target] = Template(template.read_text()).substitute(values)
    return files


def scaffold(kind: str, name: str, out: Path | None = None) -> tuple[Path, list[Path]]:
    """Write the new plugin into `out` (default ./segtk-NAME), which must not exist yet.
    Returns the folder and the files written."""
    files = render(kind, name)
    check_free(name)
    folder = Path(out) if out is not None else Path.cwd() / names(name).dist
    if folder.exists():
        raise SegtkError(f"{folder} already exists; segtk plugins new never writes into an "
                         "existing folder", hint="choose another --out, or remove that folder")
    written = []
    for relative, text in files.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return folder, written


@click.command("new")
@click.argument("kind", type=KindChoice(list(KINDS)))
@click.argument("name")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The folder to create [default: ./segtk-NAME]; it must not exist.")
def new(kind: str, name: str, out: Path | None) -> None:
    """Scaffold a working, tested plugin distribution.

    KIND is the plugin kind (one per hook, see docs/write-a-plugin.md); NAME is what users will
    type (my-noise), and
    no installed plugin (of any kind), package segtk_NAME or distribution segtk-NAME may use it
    already. The folder gets pyproject.toml with the entry point, package segtk_NAME with a small real
    implementation, tests subclassing segtk's contract suite for KIND, and a README.

    \b
    Examples:
      segtk plugins new attack my-noise
      segtk plugins new editor glow --out plugins/editors/glow
      cd segtk-my-noise && pip install -e . && python -m pytest tests
    """
    folder, written = scaffold(kind, name, out)
    n = names(name)
    click.echo(f"created {folder} ({len(written)} files): the {kind} {n.name!r} in package "
               f"{n.package}")
    for path in written:
        click.echo(f"  {path.relative_to(folder)}")
    click.echo(f"next: pip install -e {folder} && python -m pytest {folder / 'tests'}  "
               "(then `segtk plugins` lists it)")

"""The extras: optional installs on top of requirements-light.txt, one requirements file each
under extras/ in a segtk checkout (hf, onnx, http, edit, ray, mmseg, detectron2).

Why requirements files and not `pip install segtk[hf]`: the plugins are distributions in this
repository's plugins/ folders, not on PyPI, and a package's extras cannot name a folder by a
relative path. So each file lists the third-party pins and the plugin folders (`-e plugins/...`)
of one stack, and `segtk plugins` reads them to name the file that installs a plugin which is
not installed. A file may say `# install: COMMAND` when pip alone is not enough (mmcv and
detectron2 are built from source). Outside a checkout (no extras/ folder) there are none."""

from __future__ import annotations

import importlib.metadata
import re
from dataclasses import dataclass
from pathlib import Path

from segtk.core import PluginError, SegtkError
from segtk.core._errors import UnknownPlugin

CHECKOUT = Path(__file__).resolve().parent.parent  # segtk is installed editable from its root
FOLDER = "extras"
INSTALL_LINE = re.compile(r"#\s*install:\s*(.+)")


@dataclass(frozen=True)
class Extra:
    name: str  # the file's stem: hf, edit, ...
    install: str  # the command that installs it, run from the checkout
    plugins: tuple[str, ...]  # its plugin folders, relative to the checkout


@dataclass(frozen=True)
class Missing:
    """A plugin distribution an extra would install and that is not installed."""

    distribution: str
    entry_points: tuple[str, ...]  # the names it registers under (group "segtk")
    extra: Extra


def read_extras(root: Path | None = None) -> list[Extra]:
    """Every extras/NAME.txt of the checkout at `root` (default: this one), by name."""
    out = []
    for file in sorted(((root or CHECKOUT) / FOLDER).glob("*.txt")):
        install = f"pip install -r {FOLDER}/{file.name}"
        plugins = []
        for line in file.read_text().splitlines():
            override = INSTALL_LINE.fullmatch(line.strip())
            if override:
                install = override.group(1).strip()
            elif line.startswith("-e plugins/"):
                plugins.append(line.removeprefix("-e ").split("[")[0].strip())
        out.append(Extra(file.stem, install, tuple(plugins)))
    return out


def distribution_of(folder: Path) -> tuple[str, tuple[str, ...]]:
    """A plugin folder's distribution name and entry-point names, from its pyproject.toml."""
    text = (folder / "pyproject.toml").read_text()
    name = re.search(r'^name\s*=\s*"([^"]+)"', text, re.MULTILINE)
    section = re.search(r"^\[project\.entry-points\.segtk\]\n((?:[^\[\n].*\n?)*)", text,
                        re.MULTILINE)
    points = re.findall(r"^([\w-]+)\s*=", section.group(1), re.MULTILINE) if section else []
    return (name.group(1) if name else folder.name), tuple(points)


def installed(distribution: str) -> bool:
    try:
        importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def not_installed(root: Path | None = None) -> list[Missing]:
    """The plugins of the extras that this environment lacks, with what installs each."""
    root = root or CHECKOUT
    out = []
    for extra in read_extras(root):
        for folder in extra.plugins:
            if (root / folder / "pyproject.toml").is_file():
                distribution, points = distribution_of(root / folder)
                if not installed(distribution):
                    out.append(Missing(distribution, points, extra))
    return out


def extra_of(root: Path | None = None) -> dict[str, Extra]:
    """distribution name -> the extra that installs it."""
    root = root or CHECKOUT
    out = {}
    for extra in read_extras(root):
        for folder in extra.plugins:
            if (root / folder / "pyproject.toml").is_file():
                out[distribution_of(root / folder)[0]] = extra
    return out


def with_install_hint(exc: SegtkError) -> SegtkError:
    """An unknown plugin that an extra of this checkout installs: the error says which."""
    if isinstance(exc, UnknownPlugin):
        for missing in not_installed():
            if exc.name in missing.entry_points:
                return PluginError(f"{exc.message}: {missing.distribution} is not installed",
                                   hint=missing.extra.install)
    return exc

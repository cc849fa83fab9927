"""Rich output shared by the CLI commands: progress bars, tables, error lines, and --quiet
(what scripts want: no progress bar, no table; errors, warnings and the result lines only)."""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
from contextlib import ExitStack
from typing import Any

import click
from rich.console import Console, Group
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

console = Console()  # tables and chatter: silenced by --quiet
err_console = Console(stderr=True)  # errors and warnings: always shown


def set_quiet(quiet: bool) -> None:
    """Silence (or not) the progress bars and everything printed on `console`."""
    console.quiet = quiet


def _quiet(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    set_quiet(value)
    ctx.call_on_close(lambda: set_quiet(False))  # for this command only (tests run many)


quiet_option = click.option(
    "--quiet", "-q", is_flag=True, expose_value=False, is_eager=True, callback=_quiet,
    help="For scripts: no progress bar and no table; only errors, warnings and the result "
         "lines (the paths written, one per line; JSON where --json asks for it).")


def result_line(line: str, note: str = "") -> None:
    """A result line (what a command wrote), printed even with --quiet; the `note` for people
    follows it only without --quiet. Plain text: a long path is never wrapped."""
    click.echo(line if console.quiet else line + note)


def shell_safe(line: str) -> str:
    """A command line as it can be pasted into a POSIX shell: each word quoted where the shell
    would read it otherwise (`classes=a;b;c` ends a command at `;`). The words are those of
    shlex (quotes already in `line` group them, as in a shell)."""
    return shlex.join(shlex.split(line))


def progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[unit]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[status]}"),
        console=err_console,
        transient=False,
        disable=console.quiet,
    )


class JobProgress:
    """A progress bar opened when a job says it starts (after its checks and its run folder),
    so that a refused job prints its error alone; use it as a context manager around the job.
    `start(description, total, unit)` opens it (the unit names what it counts: queries,
    images, steps), `advance(n)` and `update(**fields)` move it."""

    def __init__(self) -> None:
        self._stack = ExitStack()
        self.bar: Progress | None = None
        self.task: Any = None

    def start(self, description: str, total: int, unit: str) -> None:
        if self.bar is None:
            self.bar = self._stack.enter_context(progress())
        self.task = self.bar.add_task(description, total=total, status="", unit=unit)

    def advance(self, n: int = 1, **fields: Any) -> None:
        self.update(advance=n, **fields)

    def update(self, **fields: Any) -> None:
        if self.bar is not None:
            self.bar.update(self.task, **fields)

    def __enter__(self) -> JobProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()


def table(title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]],
          fold: bool = False) -> Group:
    """A titled table; text columns left-aligned, numeric ones right-aligned. With `fold`, a
    cell too wide for the terminal continues on the next line instead of ending in '…'."""
    rows = [[fmt(v) for v in row] for row in rows]
    t = Table()
    for i, col in enumerate(columns):
        values = [str(r[i]) for r in rows if i < len(r) and str(r[i])]
        numeric = bool(values) and all(_is_number(v) for v in values)
        t.add_column(col, justify="right" if numeric and i > 0 else "left",
                     overflow="fold" if fold else "ellipsis")
    for row in rows:
        t.add_row(*row)
    return Group(Text(title, style="bold"), t)


def _is_number(text: str) -> bool:
    try:
        float(text.split(" ± ")[0])
        return True
    except ValueError:
        return False


def fmt(value: Any) -> str | Text:
    """Numbers with two decimals; text escaped so '[...]' in a spec is never read as markup."""
    if isinstance(value, Text):
        return value
    if isinstance(value, float):
        return f"{value:.2f}"
    return escape(str(value))


def pct(value: float) -> float:
    return 100.0 * value


def status_text(status: str) -> Text:
    """A plugin status coloured as `segtk plugins` shows it."""
    return Text(status, style={"ok": "green", "broken": "red", "conflict": "red"}.get(status, "yellow"))

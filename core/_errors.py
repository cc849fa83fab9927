"""Errors users see. Each carries a hint saying what to do, so the CLI can print one clear line."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class SegtkError(Exception):
    """A problem the user can fix: bad input, a missing file or dependency."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message} (hint: {self.hint})"


class DataError(SegtkError):
    """A dataset, image or label that cannot be used as it is."""


class NoSplits(DataError):
    """A --split for a dataset that has no splits (a format without them, or a flat folder):
    commands whose default split is only a preference fall back to the whole dataset."""


class ImageTooLarge(SegtkError):
    """An image over the pixel limit (--max-pixels). Not a DataError: the limit is the run's,
    not a fault of the data, so jobs that skip unreadable images stop on it instead of
    recording a skip that a resume with a higher limit would keep."""


class ModelError(SegtkError):
    """A segmenter that cannot be loaded or that misbehaved (raised, wrong shape, NaN)."""


class PluginError(SegtkError):
    """A plugin that is unknown, broken or misses a dependency."""


class UnknownPlugin(PluginError):
    """No usable registration of that kind and `name`: the CLI may know what installs it."""

    def __init__(self, message: str, hint: str | None = None, name: str = "") -> None:
        super().__init__(message, hint)
        self.name = name


class AttackError(PluginError):
    """An attack that raised, or broke a rule of the oracle: a bug in that attack, not in the
    model. `what` is the message without the attack's name ("raised ValueError: ..."), for
    callers that can name the attack better (with its distribution)."""

    def __init__(self, message: str, hint: str | None = None, what: str = "") -> None:
        super().__init__(message, hint)
        self.what = what or message


class BudgetExceeded(SegtkError):
    """An attack asked for more model queries than its budget allows: a bug in that attack."""


def failure(exc: BaseException) -> str:
    """What a plugin raised, in one line ("SystemExit: 3 (...)", for `segtk plugins` and an
    attack's failure)."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if isinstance(exc, SystemExit):
        text += " (the plugin tried to end segtk)"
    return text


@contextmanager
def naming(context: str, wrap: type[SegtkError], culprit: str, hint: str | None = None,
           passthrough: tuple[type[BaseException], ...] = ()) -> Iterator[None]:
    """Say which image (or step) failed: prefix segtk errors with `context`, and turn anything
    else a model, editor or filter raises into `wrap`, naming the `culprit`."""
    try:
        yield
    except passthrough:
        raise
    except SegtkError as exc:
        raise type(exc)(f"{context}: {exc.message}", exc.hint) from exc
    except Exception as exc:
        raise wrap(f"{context}: {culprit} raised {type(exc).__name__}: {exc}", hint=hint) from exc

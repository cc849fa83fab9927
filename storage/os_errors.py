"""OS errors as one-line SegtkErrors with a hint chosen by errno.

A full disk, a read-only or unwritable folder, or a file where a folder should be are the user's
to fix, so they get the same one clear line as bad input, never a traceback.
"""

from __future__ import annotations

import errno

from segtk.core import SegtkError

_FULL = "the disk is full: free space (or choose an --out on another disk), then rerun with --resume"
_DENIED = "permission denied: choose an --out you can write to, or fix the folder's permissions"

HINTS: dict[int, str] = {
    errno.ENOSPC: _FULL,
    errno.EDQUOT: _FULL.replace("the disk is full", "your disk quota is used up"),
    errno.EFBIG: "the file grew past the file system's size limit: choose an --out on another disk",
    errno.EACCES: _DENIED,
    errno.EPERM: _DENIED,
    errno.EROFS: "that file system is read-only: choose an --out on a writable disk",
    errno.ENOTDIR: "part of that path is a file, not a folder: choose another --out (or move the file)",
    errno.EEXIST: "a file already has that name: choose another path",
    errno.EISDIR: "that path is a folder where a file is needed: choose another path",
    errno.ENOENT: "check the path: a folder in it does not exist",
    errno.ENAMETOOLONG: "the path is too long: choose a shorter --out",
    errno.EIO: "the disk reported an I/O error: check it (e.g. dmesg), then rerun with --resume",
    errno.EMFILE: "too many open files: raise the limit (ulimit -n) or use fewer --workers",
    errno.ENFILE: "too many open files on this system: close other programs or use fewer --workers",
}


def os_error(exc: OSError, doing: str = "") -> SegtkError:
    """`exc` as a SegtkError: '[doing: ]what went wrong (path)', hint by errno."""
    what = exc.strerror or str(exc) or type(exc).__name__
    paths = [str(p) for p in (exc.filename, exc.filename2) if p is not None]
    where = f" ({' -> '.join(paths)})" if paths and not doing else ""
    message = f"{doing}: {what}" if doing else f"{what}{where}"
    hint = HINTS.get(exc.errno or -1, "check the path, its permissions and the disk (rerun with "
                                      "--debug for the traceback)")
    return SegtkError(message, hint=hint)

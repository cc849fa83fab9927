"""Reading an npz from an untrusted peer: the zip directory and the npy header before the data.

Both ends use this: `segtk serve` for request images, the client for answered labels. A
hostile npz can declare millions of zip entries (zipfile would parse them all: 2 M entries
cost ~1 GB and 18 s) or a deflated member of gigabytes (a bomb), so the zip's end record is
read first and bounded, then the member's npy header (shape, dtype) is checked by the caller,
and only then is any data inflated, never past the size that header implies.
"""

from __future__ import annotations

import struct
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

import numpy as np

from segtk_http.protocol import ProtocolError

# An npz of segtk-http/1 holds one array; a few more (sent by other clients) are tolerated.
MAX_ENTRIES = 16
MAX_DIRECTORY_BYTES = 64 * 1024  # 16 entries with long names and zip64 fields fit easily
# What a bad zip member or npy header can raise while being read.
NPZ_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, RuntimeError,
              ValueError, OSError, EOFError, zlib.error, struct.error)

END = struct.Struct("<4s4H2LH")  # end of central directory record
END64_LOCATOR = struct.Struct("<4sLQL")
END64 = struct.Struct("<4sQ2H2L4Q")
END_SIGNATURE, END64_LOCATOR_SIGNATURE, END64_SIGNATURE = b"PK\x05\x06", b"PK\x06\x07", b"PK\x06\x06"


def declared_directory(fp: IO[bytes]) -> tuple[int, int]:
    """(entries, directory bytes) that the zip's end records declare, found where zipfile
    looks for them (the last 22 bytes, else the last 64 KiB; a zip64 record just before)."""
    size = fp.seek(0, 2)
    span = min(size, END.size + 65535)
    fp.seek(size - span)
    tail = fp.read(span)
    fp.seek(0)
    if tail[-END.size:-END.size + 4] == END_SIGNATURE and tail[-2:] == b"\0\0":
        at = span - END.size
    else:
        at = tail.rfind(END_SIGNATURE)
        if at < 0 or at + END.size > span:
            raise ProtocolError("body is not a valid npz file (no zip end record)")
    _, _, _, on_disk, total, directory, _, _ = END.unpack_from(tail, at)
    entries = max(on_disk, total)
    where = size - span + at  # the zip64 locator and record sit just before the end record
    if where >= END64_LOCATOR.size + END64.size:
        fp.seek(where - END64_LOCATOR.size - END64.size)
        block = fp.read(END64.size + END64_LOCATOR.size)
        fp.seek(0)
        if block[END64.size:END64.size + 4] == END64_LOCATOR_SIGNATURE and \
                block[:4] == END64_SIGNATURE:
            fields = END64.unpack_from(block)
            entries = max(entries, fields[6], fields[7])
            directory = max(directory, fields[8])
    return entries, directory


def check_directory(fp: IO[bytes], what: str) -> None:
    """Refuse (400) a zip whose directory is bigger than an npz of a few arrays, unparsed."""
    entries, directory = declared_directory(fp)
    if entries > MAX_ENTRIES or directory > MAX_DIRECTORY_BYTES:
        raise ProtocolError(f"{what} is a zip declaring {entries} entries in a {directory}-byte "
                            f"directory; a segtk-http/1 npz holds at most {MAX_ENTRIES} arrays")


def read_npy_header(fp: IO[bytes]) -> tuple[tuple[int, ...], bool, np.dtype]:
    version = np.lib.format.read_magic(fp)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(fp)
    if version == (2, 0):
        return np.lib.format.read_array_header_2_0(fp)
    raise ProtocolError(f"npy format version {version} is not supported; save with np.savez")


@dataclass(frozen=True)
class Header:
    """An npz member's npy header, read before its data."""

    shape: tuple[int, ...]
    fortran: bool
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=object)) * self.dtype.itemsize


def member_names(zf: zipfile.ZipFile) -> str:
    return ", ".join(n.removesuffix(".npy") for n in zf.namelist()[:MAX_ENTRIES]) or "none"


def open_member(zf: zipfile.ZipFile, key: str, what: str,
                check: Callable[[Header], None]) -> tuple[IO[bytes], Header]:
    """The open member `key`.npy, positioned at its data, and its header, which `check` has
    accepted; the zip entry must then declare exactly the bytes the header implies (zipfile
    never inflates past that)."""
    try:
        member = zf.getinfo(f"{key}.npy")
    except KeyError:
        raise ProtocolError(f"{what} has no array {key!r} (has: {member_names(zf)})") from None
    fp = zf.open(member)
    try:
        header = Header(*read_npy_header(fp))
        check(header)
        expected = fp.tell() + header.nbytes
        if member.file_size != expected:
            raise ProtocolError(f"{what}: member {key}.npy declares {member.file_size} bytes, "
                                f"its npy header {expected}")
    except BaseException:
        fp.close()
        raise
    return fp, header


def as_array(raw: bytes, header: Header) -> np.ndarray:
    """The data bytes of a member as an array of the header's shape (no copy)."""
    flat = np.frombuffer(raw, dtype=header.dtype)
    if header.fortran:
        return flat.reshape(header.shape[::-1]).transpose()
    return flat.reshape(header.shape)

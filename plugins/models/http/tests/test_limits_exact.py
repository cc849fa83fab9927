"""The request decoders of segtk serve (segtk_http.limits), to the word and the edge: every
refusal's message and status, sizes at the boundaries (0 and 1 in float images, 2^31 in a PNG
header, 24 header bytes), several read blocks, other PNG colour modes, no stray warnings.
Unit checks: no server, no clock."""

from __future__ import annotations

import base64
import io
import json
import struct
import warnings
import zipfile
import zlib

import numpy as np
import pytest
from PIL import Image

from segtk_http.limits import Limits, decode_pngs, json_pngs, npz_images, png_images
from segtk_http.protocol import LimitError, ProtocolError

DEFAULT = Limits()


def npz(images: np.ndarray) -> io.BytesIO:
    buf = io.BytesIO()
    np.savez(buf, images=images)
    buf.seek(0)
    return buf


def png(array: np.ndarray, mode: str | None = None) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(array, mode=mode).save(buf, format="PNG")
    return buf.getvalue()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def refusal(act, kind: type[ProtocolError] = ProtocolError) -> str:
    with pytest.raises(kind) as err:
        act()
    assert type(err.value) is kind
    return str(err.value)


def test_float_images_may_hold_exactly_0_and_1_and_an_empty_batch_is_fine() -> None:
    edges = np.zeros((1, 3, 2, 2), np.float32)
    edges[0, :, 0] = 1.0
    assert np.array_equal(npz_images(npz(edges), DEFAULT), edges)
    assert npz_images(npz(np.zeros((0, 3, 4, 4), np.float32)), DEFAULT).shape == (0, 3, 4, 4)


@pytest.mark.parametrize(("value", "message"), [
    (np.nan, "images contain NaN values; send pixel values in [0, 1]"),
    (np.inf, "images contain infinite values (or float64 beyond float32's range); "
             "send pixel values in [0, 1]"),
    (1e300, "images contain infinite values (or float64 beyond float32's range); "
            "send pixel values in [0, 1]"),
    (-0.5, "images must hold pixel values in [0, 1], got values in [-0.5, 0]"),
])
def test_bad_float_values_are_refused_word_for_word_without_warnings(value, message) -> None:
    images = np.zeros((1, 3, 2, 2), np.float64)
    images[0, 1, 1, 1] = value
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a float64 beyond float32 is refused, not warned about
        assert refusal(lambda: npz_images(npz(images), DEFAULT)) == message


def test_zero_width_and_height_are_refused() -> None:
    for shape, size in (((1, 3, 5, 0), "5x0"), ((1, 3, 0, 5), "0x5")):
        assert refusal(lambda shape=shape: npz_images(npz(np.zeros(shape, np.uint8)), DEFAULT)) == \
            f"images have zero size ({size}); send images of at least 1x1 pixel"


def test_images_larger_than_one_read_block_decode_whole() -> None:
    images = np.random.default_rng(0).random((1, 3, 700, 600), dtype=np.float32)  # 1.26M values
    assert np.array_equal(npz_images(npz(images), DEFAULT), images)


def test_a_broken_zip_names_the_zip_error() -> None:
    raw = npz(np.zeros((1, 3, 1, 1), np.uint8)).getvalue().replace(b"PK\x01\x02", b"PK\x01\x03")
    assert refusal(lambda: npz_images(io.BytesIO(raw), DEFAULT)).startswith(
        "body is not a valid npz file (BadZipFile: ")


def test_an_npz_without_images_names_the_body_and_its_arrays() -> None:
    buf = io.BytesIO()
    np.savez(buf, pictures=np.zeros((1, 3, 1, 1), np.uint8))
    buf.seek(0)
    assert refusal(lambda: npz_images(buf, DEFAULT)) == \
        "npz body has no array 'images' (has: pictures)"


def test_json_bodies_that_are_not_a_list_of_strings_are_refused_word_for_word() -> None:
    shape = 'JSON body must be {"images": ["<base64 PNG>", ...]}'
    payloads: list[object] = [[], {"images": "x"}, {"pictures": []}]
    for payload in payloads:
        assert refusal(lambda payload=payload: png_images(payload, DEFAULT)) == shape
    assert refusal(lambda: png_images({"images": [b64(png(np.zeros((2, 2, 3), np.uint8))), 3]},
                                      DEFAULT)) == "every entry of images must be a base64 PNG string"


def test_base64_is_strict_and_names_the_image() -> None:
    good = b64(png(np.zeros((2, 2, 3), np.uint8)))
    message = refusal(lambda: png_images({"images": [good, good[:8] + "@" + good[8:]]}, DEFAULT))
    assert message.startswith("image 1 is not base64 (")


def test_an_empty_list_is_an_empty_float32_batch() -> None:
    out = png_images({"images": []}, DEFAULT)
    assert out.shape == (0, 3, 0, 0) and out.dtype == np.float32


def test_one_image_and_other_colour_modes_decode_to_rgb() -> None:
    grey = np.arange(12, dtype=np.uint8).reshape(3, 4) * 20
    rgba = np.dstack([np.full((3, 4, 3), 200, np.uint8), np.full((3, 4), 7, np.uint8)])
    for data, rgb in ((png(grey, "L"), np.repeat(grey[..., None], 3, 2)),
                      (png(rgba, "RGBA"), rgba[..., :3])):
        out = png_images({"images": [b64(data)]}, DEFAULT)
        assert out.dtype == np.float32 and np.array_equal(out[0], rgb.transpose(2, 0, 1) / np.float32(255))


def test_mixed_sizes_are_listed() -> None:
    images = [b64(png(np.zeros(s, np.uint8))) for s in ((2, 3, 3), (4, 5, 3), (2, 3, 3))]
    assert refusal(lambda: png_images({"images": images}, DEFAULT)) == \
        "all images of one request must have the same size, got 2x3, 4x5"


def ihdr(width: int, height: int) -> bytes:
    """A PNG signature and IHDR chunk declaring width x height (and nothing after it)."""
    body = b"IHDR" + struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + body + struct.pack(">I", zlib.crc32(body))


def test_png_headers_are_read_to_the_byte() -> None:
    def message(data: bytes, limits: Limits = DEFAULT, kind=ProtocolError) -> str:
        return refusal(lambda: png_images({"images": [b64(data)]}, limits), kind)

    not_png = "image 0 is not a PNG (no PNG signature and header)"
    assert message(ihdr(3, 2)[:23]) == not_png
    assert message(b"\x89PNX" + ihdr(3, 2)[4:]) == not_png  # signature broken, IHDR in place
    assert message(ihdr(3, 2)[:12] + b"IHDX" + ihdr(3, 2)[16:]) == not_png
    assert message(ihdr(3, 2)[:24]) != not_png  # 24 bytes hold the size: refused by the decoder
    assert message(ihdr(2**31 + 1, 1), kind=LimitError).startswith(  # unsigned: no negative size
        "image 0 is 1x2147483649 = 2147483649 pixels")
    assert message(ihdr(3, 2)).startswith("image 0 is not a PNG (")  # no image data
    assert "NoneType" not in message(ihdr(3, 2))


def test_pillows_own_bomb_guard_is_a_limit(monkeypatch) -> None:
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 10)  # Pillow refuses past twice this
    data = b64(png(np.zeros((5, 5, 3), np.uint8)))
    assert refusal(lambda: png_images({"images": [data]}, DEFAULT), LimitError).startswith(
        "image 0 refused by Pillow: Image size (25 pixels) exceeds limit of 20 pixels")


def test_a_zip_declaring_too_many_entries_names_the_npz_body() -> None:
    raw = bytearray(npz(np.zeros((1, 3, 1, 1), np.uint8)).getvalue())
    end = raw.rfind(b"PK\x05\x06")
    raw[end + 8:end + 12] = struct.pack("<2H", 100, 100)  # entries on this disk, in total
    assert refusal(lambda: npz_images(io.BytesIO(bytes(raw)), DEFAULT)).startswith(
        "npz body is a zip declaring 100 entries in a ")


def test_an_images_npy_shorter_than_its_zip_entry_declares_ends_early() -> None:
    """A deflated member whose stream stops short of the size the zip declares, its CRC that of
    the short data: zipfile hands back fewer bytes without an error, and the decoder says so."""
    buf = io.BytesIO()
    np.save(buf, np.zeros((1, 3, 2, 2), np.uint8))
    whole = buf.getvalue()
    body = io.BytesIO()
    with zipfile.ZipFile(body, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("images.npy", whole[:-5])  # 7 of the 12 pixel values
    raw = bytearray(body.getvalue())
    struct.pack_into("<L", raw, raw.index(b"PK\x03\x04") + 22, len(whole))  # local header
    struct.pack_into("<L", raw, raw.index(b"PK\x01\x02") + 24, len(whole))  # central directory
    assert refusal(lambda: npz_images(io.BytesIO(bytes(raw)), DEFAULT)) == \
        "images.npy ends early: 12 values declared"


# --- JSON bodies, read from their bytes (no JSON document is built) ------------------------------

def json_images(body: bytes, limits: Limits = DEFAULT) -> np.ndarray:
    return decode_pngs(json_pngs(body, limits.max_batch), limits)


def test_json_bodies_decode_as_the_parsed_payload_does() -> None:
    g = np.random.default_rng(3)
    pngs = [b64(png(g.integers(0, 256, (3, 5, 3), dtype=np.uint8))) for _ in range(3)]
    expected = png_images({"images": pngs}, DEFAULT)
    a, b, c = pngs
    slashed = [p.replace("/", "\\/") for p in pngs]
    for body in (json.dumps({"images": pngs}),
                 f' \r\n\t{{ "images" :[\n"{a}" ,\n "{b}","{c}" ]\n}}\n ',
                 json.dumps({"images": slashed}).replace("\\\\", "\\")):
        assert np.array_equal(json_images(body.encode()), expected), body[:40]
    assert json_images(b'{"images": []}').shape == (0, 3, 0, 0)
    assert json_images(b'{"images":[ ]}').shape == (0, 3, 0, 0)


@pytest.mark.parametrize(("body", "message"), [
    (b"[]", 'JSON body must be {"images": ["<base64 PNG>", ...]}; it starts with b\'[]\''),
    (b"", 'JSON body must be {"images": ["<base64 PNG>", ...]}; it starts with b\'\''),
    (b'{"pictures": []}', 'JSON body must be {"images": ["<base64 PNG>", ...]}; it starts '
                          'with b\'{"pictures": []}\''),
    (b"[" * 100_000, 'JSON body must be {"images": ["<base64 PNG>", ...]}; it starts with '
                     "b'[[[[[[[[[[[[[[[[[[[[[[[['..."),
    (b'{"images": [' + b"9" * 5000 + b"]}", "every entry of images must be a base64 PNG "
                                             "string; found b'999999999999999999999999'... at "
                                             "byte 12"),
    (b'{"images": [[]]}', "every entry of images must be a base64 PNG string; found b'[]]}' "
                          "at byte 12"),
    (b'{"images": ["AAAA" "AAAA"]}', "every entry of images must be a base64 PNG string, "
                                     "with commas between; found b'\"AAAA\"]}' at byte 19"),
    (b'{"images": ["AAAA",]}', "every entry of images must be a base64 PNG string; found "
                               "b']}' at byte 19"),
    (b'{"images": ["AAAA"], "x": 1}', 'JSON body must be {"images": ["<base64 PNG>", ...]} '
                                      "and nothing more; found b'], \"x\": 1}' at byte 18"),
    (b'{"images": ["AAAA"]}}', 'JSON body must be {"images": ["<base64 PNG>", ...]} and '
                               "nothing more; found b']}}' at byte 18"),
    (b'{"images": ["AAAA', "image 0 is not base64 (its string at byte 12 does not end)"),
    (b'{"images": ["AA\\"AA"]}', "image 0 is not base64 (an escape other than \\/ in its "
                                 "string at byte 12)"),
    (b'{"images": ["\\u0041AAA"]}', "image 0 is not base64 (an escape other than \\/ in its "
                                    "string at byte 12)"),
])
def test_malformed_json_bodies_are_refused_word_for_word(body: bytes, message: str) -> None:
    assert refusal(lambda: json_pngs(body, 64)) == message


def test_json_strings_are_strict_base64_and_counted_before_decoding() -> None:
    for text in ("AAA", "AA=A", "AA AA", "\u00e9", "AA\\nA"):
        body = f'{{"images": ["AAAA", "{text}"]}}'.encode()
        assert refusal(lambda body=body: json_pngs(body, 64)).startswith("image 1 is not base64 (")
    many = b'{"images": [' + b'"AAAA",' * 10**6 + b'"AAAA"]}'
    assert refusal(lambda: json_pngs(many, 64), LimitError) == \
        "more than 64 images in one request, the server takes at most 64; split the batch"
    assert refusal(lambda: json_pngs(b'{"images": ["AAAA", "AAAA"]}', 1), LimitError).startswith(
        "more than 1 images")

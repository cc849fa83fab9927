"""segtk_http.guard without a server: the token check, Host names, the log filter and the
connection cap's fit to the open-file limit. The server-level checks (400 idle connections
under a 256 open-file limit, 503 when all are busy, one log line per cause, 401/403) are in
test_limits.py."""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import resource
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
import torch

from segtk.core import Segmenter, SegtkError
from segtk_http import guard
from segtk_http.guard import (
    FD_RESERVE,
    Access,
    OncePerCause,
    allowed_hosts,
    check_token,
    connection_cap,
    host_name,
)
from segtk_http.protocol import dump_npz


def test_the_token_is_compared_in_constant_time(monkeypatch) -> None:
    compared: list[tuple[bytes, bytes]] = []
    original = hmac.compare_digest

    def compare_digest(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return original(a, b)

    monkeypatch.setattr(guard.hmac, "compare_digest", compare_digest)
    access = Access(token="s3cret-token")
    assert access.refusal([(b"authorization", b"Bearer s3cret-token")]) is None
    assert access.refusal([(b"authorization", b"bearer  s3cret-token ")]) is None
    assert access.refusal([(b"authorization", b"Bearer s3cret-tokeN")]) == (
        401, "wrong token (Authorization: Bearer TOKEN; the segtk client sends $SEGTK_TOKEN)")
    assert compared == [(b"s3cret-token", b"s3cret-token")] * 2 + [(b"s3cret-tokeN",
                                                                    b"s3cret-token")]
    for header in ([], [(b"authorization", b"Bearer")], [(b"authorization", b"Basic eDp5")]):
        refusal = access.refusal(header)
        assert refusal is not None and refusal[0] == 401 and "needs a token" in refusal[1]
    assert Access().refusal([]) is None  # no token, no Host list: anyone


def test_host_names_and_the_allow_list() -> None:
    assert [host_name(v) for v in ("LocalHost:80", "[::1]:8000", "[::1]", "127.0.0.1",
                                   "example.org:1:2", "")] == \
        ["localhost", "[::1]", "[::1]", "127.0.0.1", "example.org:1:2", ""]
    loopback = {"localhost", "127.0.0.1", "[::1]"}
    assert allowed_hosts("127.0.0.1", ()) == loopback
    assert allowed_hosts("::1", ()) == loopback
    assert allowed_hosts("127.0.0.2", ["Proxy.Example:443"]) == loopback | {"127.0.0.2",
                                                                            "proxy.example"}
    assert allowed_hosts("0.0.0.0", ()) is None  # a network bind: the token is the defence
    assert allowed_hosts("0.0.0.0", ["models.example"]) == loopback | {"0.0.0.0",
                                                                       "models.example"}
    assert allowed_hosts("127.0.0.1", ["*"]) is None
    access = Access(hosts=allowed_hosts("127.0.0.1", ()))
    assert access.refusal([(b"host", b"localhost:9")]) is None
    refusal = access.refusal([(b"host", b"rebound.example:8000")])
    assert refusal is not None and refusal[0] == 403 and "'rebound.example'" in refusal[1]
    long = access.refusal([(b"host", b"x" * 5000)])
    assert long is not None and len(long[1]) < 400


def test_tokens_must_fit_a_header() -> None:
    assert check_token(None) is None and check_token("") is None
    assert check_token("a-B_9.~+/=") == "a-B_9.~+/="
    for bad in ("two words", "tab\there", "caf\u00e9", "line\n"):
        with pytest.raises(SegtkError, match="printable ASCII without spaces"):
            check_token(bad)


def record(message: str, exc: BaseException | None = None, *args: object) -> logging.LogRecord:
    info = (type(exc), exc, None) if exc else None
    return logging.LogRecord("uvicorn.error", logging.ERROR, __file__, 1, message, args, info)


def test_each_cause_is_logged_once_then_once_a_minute_with_a_count() -> None:
    now = [0.0]
    once = OncePerCause(every=60, clock=lambda: now[0])
    first = record("socket.accept() out of system resource\nsocket: fd=3", OSError(24, "x"))
    assert once.filter(first) and first.exc_info is not None  # the first keeps its traceback
    shown = [once.filter(record("socket.accept() out of system resource\nsocket: fd=3",
                                OSError(24, "x"))) for _ in range(999)]
    assert not any(shown)
    assert once.filter(record("socket.accept() out of system resource", ValueError("y")))
    assert once.filter(record("the model raised %s", None, "a"))  # another cause
    assert not once.filter(record("the model raised %s", None, "b"))  # same template
    now[0] = 61.0
    later = record("socket.accept() out of system resource\nsocket: fd=3", OSError(24, "x"))
    assert once.filter(later) and later.exc_info is None
    assert later.getMessage() == ("socket.accept() out of system resource (and 999 more like "
                                  "this in the last 61 s, not shown)")
    assert not once.filter(record("socket.accept() out of system resource\nsocket: fd=3",
                                  OSError(24, "x")))
    debug = logging.LogRecord("uvicorn.error", logging.DEBUG, __file__, 1, "x", (), None)
    assert all(once.filter(debug) for _ in range(3))  # below INFO: not filtered


def test_the_filter_holds_a_bounded_number_of_causes() -> None:
    once = OncePerCause()
    for i in range(OncePerCause.MAX_CAUSES * 3):
        assert once.filter(record(f"cause {i}"))
    assert len(once.causes) == OncePerCause.MAX_CAUSES


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_the_connection_cap_fits_the_open_file_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    low = len(os.listdir("/proc/self/fd")) + FD_RESERVE + 100
    resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))
    try:
        assert 98 <= connection_cap(None) <= 100  # the listing itself opens one
        assert connection_cap(50) == 50
        with pytest.raises(SegtkError, match="--max-connections 1000 does not fit the "
                                             "open-file limit") as err:
            connection_cap(1000)
        assert "ulimit -n" in str(err.value.hint)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    if soft >= 2000:  # plenty of room: the default is 1000
        assert connection_cap(None) == 1000


def asgi(app: Any, method: str, path: str, body: bytes = b"",
         headers: Sequence[tuple[bytes, bytes]] = ()) -> tuple[int, dict[str, Any]]:
    """One request through an ASGI app in this process: (status, JSON answer)."""
    sent: list[dict[str, Any]] = []
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": method, "scheme": "http", "path": path, "raw_path": path.encode(),
             "query_string": b"", "root_path": "", "client": ("127.0.0.1", 1),
             "server": ("127.0.0.1", 8000), "headers": [(b"host", b"127.0.0.1"), *headers]}
    asyncio.run(app(scope, receive, send))
    answer = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], json.loads(answer)


class Failing(Segmenter):
    name = "failing"
    classes = ["a", "b"]

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        raise RuntimeError(f"out of luck with {images.shape[0]} images")


def test_an_unforeseen_failure_is_answered_and_logged_once_per_cause(monkeypatch,
                                                                    caplog) -> None:
    """A body that breaks the decoder in a way no check foresaw is still the client's fault
    (400 naming the exception, not a 500); the model's own failure is a 500. Either is logged
    once, with its traceback, however many requests hit it."""
    import segtk_http.server as server
    from segtk_http.guard import log_once_per_cause

    def broken_decoder(body: Any, limits: Any) -> Any:
        raise KeyError("no check foresaw this")

    log_once_per_cause()
    monkeypatch.setattr(server, "npz_images", broken_decoder)
    app = server.create_app(Failing())
    npz = [(b"content-type", b"application/x-npz")]
    with caplog.at_level(logging.ERROR, logger="uvicorn.error"):
        for _ in range(5):
            status, answer = asgi(app, "POST", "/predict", b"x", npz)
            assert status == 400 and answer == {
                "error": "the body cannot be decoded (KeyError: 'no check foresaw this')"}
        monkeypatch.undo()
        body = dump_npz(images=np.zeros((1, 3, 2, 2), np.float32))
        for _ in range(5):
            status, answer = asgi(app, "POST", "/predict", body, npz)
            assert status == 500 and answer == {
                "error": "the model raised RuntimeError: out of luck with 1 images"}
    messages = [(r.getMessage(), r.exc_info is not None) for r in caplog.records]
    assert messages == [("decoding application/x-npz raised KeyError", True),
                        ("the model raised RuntimeError", True)], messages

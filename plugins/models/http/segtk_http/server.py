"""`segtk serve`: expose any segmenter over segtk-http/1 with Starlette on uvicorn.

The model runs in a worker thread, one request at a time (segmenters need not be thread-safe);
every image it labels is counted, and the counts are in GET /info and GET /stats. Memory is
bounded: bodies are received concurrently, each within --body-timeout, all together within
--body-buffer-mb, and counted as they stream, chunked or not; sizes are checked before decoding
(limits.py); one request at a time is decoded, run and answered, and the model sees at most
--forward-pixels at once, sized from --memory-mb (budget.py). A slow sender holds only its own
bytes, never the model's turn. Connections, Host names, the token and the log are guarded in
guard.py.
"""

from __future__ import annotations

import asyncio
import io
import logging
import socket
import threading
import time
from typing import Any

import numpy as np
import torch
from PIL import Image

from segtk.core import Segmenter, SegtkError, check_prediction
from segtk_http.guard import (
    Access,
    AccessGate,
    ConnectionGuard,
    guarded,
    guarded_protocol,
    is_loopback,
    log_cause,
    log_once_per_cause,
)
from segtk_http.limits import MIB, Limits, decode_pngs, json_pngs, npz_images
from segtk_http.protocol import (
    JSON,
    NPZ,
    PROTOCOL,
    Busy,
    LimitError,
    ProtocolError,
    bounded,
    dump_npz,
    encode_png,
    labels_to_wire,
    media_type,
)

SERVER_DEPS = ("uvicorn", "starlette")
SERVER_INSTALL = "pip install -e plugins/models/http  (pulls uvicorn==0.54.0, starlette==1.10.0)"


class BodyBuffer:
    """The bytes of request bodies being held at once, all requests together: a body that
    would pass `limit` is refused (503, the client retries) instead of waiting for room."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def take(self, size: int) -> None:
        if self.used + size > self.limit:
            raise Busy(f"the server is busy: {self.used} bytes of request bodies are being "
                       f"received (segtk serve --body-buffer-mb {self.limit / MIB:g}); retry")
        self.used += size

    def give(self, size: int) -> None:
        self.used -= size


class ServedModel:
    """The segmenter plus the counters; `predict` is serialised by a lock."""

    def __init__(self, segmenter: Segmenter, limits: Limits) -> None:
        self.segmenter = segmenter
        self.limits = limits
        self.images = 0
        self.requests = 0
        self.errors = 0
        self.started = time.time()
        self.buffer = BodyBuffer(limits.max_buffered_bytes)
        self._lock = threading.Lock()

    def predict(self, images: np.ndarray) -> np.ndarray:
        """Wire labels [N,H,W] (uint8, or uint16 when an id >= 256). The model sees chunks of
        whole images of at most `max_forward_pixels` together, so its memory is bounded."""
        n, _, h, w = images.shape
        out = np.empty((n, h, w), dtype=np.uint16)
        step = max(1, self.limits.max_forward_pixels // max(h * w, 1))
        with self._lock:
            for start in range(0, n, step):
                x = torch.from_numpy(images[start:start + step]).to(self.segmenter.device)
                labels = check_prediction(x, self.segmenter.predict(x), self.segmenter.name)
                out[start:start + step] = labels_to_wire(labels.cpu().numpy())
                del x, labels
            self.images += n
            self.requests += 1
        return out if n and out.max() >= 256 else out.astype(np.uint8)

    def stats(self) -> dict[str, Any]:
        return {"served_images": self.images, "served_requests": self.requests,
                "failed_requests": self.errors, "buffered_body_bytes": self.buffer.used,
                "uptime_s": round(time.time() - self.started, 3)}

    def info(self) -> dict[str, Any]:
        m = self.segmenter
        return {"protocol": PROTOCOL, "name": m.name, "classes": list(m.classes),
                "outputs": int(m.num_outputs), "ignore_index": int(m.ignore_index),
                **self.limits.info(),
                "formats": [NPZ, JSON], **self.stats()}


def create_app(segmenter: Segmenter, limits: Limits | None = None, access: Access | None = None):
    """The Starlette app serving `segmenter` (importable for embedding in another ASGI app).

    Bodies are received concurrently, outside the model's turn, within `body_timeout` and the
    shared `max_buffered_bytes`; decoding, the forward pass and encoding the answer take turns.
    `access` (a token, the Host names served) is checked before a request is read.
    """
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.middleware import Middleware
    from starlette.requests import ClientDisconnect, Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    limits = limits or Limits()
    served = ServedModel(segmenter, limits)
    turn = asyncio.Semaphore(1)  # one request decoded and run at a time
    buffer = served.buffer

    def error(status: int, message: str, unread: bool = False) -> JSONResponse:
        """A JSON error of bounded length; `unread`: the body is not all read, so this
        connection cannot carry another request."""
        served.errors += 1
        headers = {"Retry-After": "1"} if status == 503 else {}
        if unread:
            headers["Connection"] = "close"
        return JSONResponse({"error": bounded(message)}, status_code=status, headers=headers)

    async def info(request: Request) -> JSONResponse:
        return JSONResponse(served.info())

    async def stats(request: Request) -> JSONResponse:
        return JSONResponse(served.stats())

    async def predict(request: Request) -> Response:
        kind = media_type(request.headers.get("content-type"))
        if kind not in (JSON, NPZ, "application/octet-stream", ""):
            return error(415, f"unsupported content type {kind!r}; send {NPZ} or {JSON}")
        try:
            body = await asyncio.wait_for(read_body(request, limits.max_body_bytes, buffer),
                                          limits.body_timeout)
        except TimeoutError:
            return error(408, f"the body did not arrive within {limits.body_timeout:g} s "
                              "(segtk serve --body-timeout); send it faster or in smaller "
                              "requests", unread=True)
        except ProtocolError as exc:
            return error(exc.status, str(exc), unread=True)
        except ClientDisconnect:  # gone mid-body: nobody to answer
            return Response(status_code=400, headers={"Connection": "close"})
        held = body.getbuffer().nbytes  # taken from `buffer` until the body is decoded
        try:
            async with turn:
                try:
                    decode = json_request if kind == JSON else npz_images
                    images = await run_in_threadpool(decode, body, limits)
                except ProtocolError as exc:
                    return error(exc.status, str(exc))
                except Exception as exc:  # a malformed body no check foresaw: still a 400
                    log_cause(logging.ERROR, f"decoding {kind or NPZ} raised "
                              f"{type(exc).__name__}", exc=exc)
                    return error(400, f"the body cannot be decoded ({type(exc).__name__}: {exc})")
                finally:
                    body.close()
                    buffer.give(held)
                    held = 0
                try:
                    labels = await run_in_threadpool(served.predict, images)
                except Exception as exc:  # the model's own failure: report it, keep serving
                    log_cause(logging.ERROR, f"the model raised {type(exc).__name__}", exc=exc)
                    return error(500, f"the model raised {type(exc).__name__}: {exc}")
                del images
                if kind == JSON:
                    return JSONResponse(await run_in_threadpool(json_answer, labels))
                return Response(await run_in_threadpool(dump_npz, labels=labels),
                                media_type=NPZ)
        finally:
            buffer.give(held)  # still held only if cancelled while waiting for the turn

    def refused() -> None:
        served.errors += 1

    app = Starlette(routes=[
        Route("/info", info, methods=["GET"]),
        Route("/stats", stats, methods=["GET"]),
        Route("/predict", predict, methods=["POST"]),
    ], middleware=[Middleware(AccessGate, access=access or Access(), refused=refused)])
    app.state.served = served
    return app


async def read_body(request, limit: int, buffer: BodyBuffer) -> io.BytesIO:
    """The body, counted as it streams (Content-Length or chunked): 413 past `limit` bytes,
    503 when it would overfill `buffer`; what it holds stays taken from `buffer`."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise LimitError(f"body of {declared} bytes is over the server's limit of {limit} "
                         "(segtk serve --max-body-mb); send fewer images per request")
    buf, size = io.BytesIO(), 0
    try:
        async for chunk in request.stream():
            if size + len(chunk) > limit:
                raise LimitError(f"body is over the server's limit of {limit} bytes (segtk "
                                 "serve --max-body-mb); send fewer images per request")
            buffer.take(len(chunk))
            size += len(chunk)
            buf.write(chunk)
    except BaseException:  # refused, timed out (cancelled) or disconnected: give the room back
        buffer.give(size)
        raise
    buf.seek(0)
    return buf


def json_answer(labels: np.ndarray) -> dict[str, Any]:
    return {"labels": [encode_png(lab) for lab in labels], "dtype": str(labels.dtype)}


def json_request(body: io.BytesIO, limits: Limits) -> np.ndarray:
    """Images of a JSON body: its PNGs are read from the body's bytes (no JSON document is
    built, see `json_pngs`), which are let go before the PNGs are decoded."""
    data = body.getvalue()  # the buffer itself, not a copy
    pngs = json_pngs(data, limits.max_batch)
    del data
    body.close()
    return decode_pngs(pngs, limits)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (0: any free port), or a one-line SegtkError."""
    where = f"{host}:{port}"
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise SegtkError(f"cannot listen on {where}: {exc.strerror or exc}",
                         hint="--host must be an address or name of this machine, e.g. "
                              "127.0.0.1") from exc
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise SegtkError(f"cannot listen on {where}: {exc.strerror or exc}",
                         hint="choose another --port (--port 0 picks a free one) or stop the "
                              "program using it") from exc
    return sock


def bind_warning(host: str, token: bool = False) -> str | None:
    """One line to print when `host` is not a loopback address."""
    if is_loopback(host):
        return None
    if token:
        return (f"warning: serving on {host}, which is not a loopback address: clients need the "
                "token, which travels unencrypted over plain HTTP; put a TLS proxy in front "
                "unless the network is trusted")
    return (f"warning: serving on {host}, which is not a loopback address: anyone who can "
            "reach it can query the model (there is no authentication); use --host 127.0.0.1 "
            "or --token unless the network is trusted")


def url_of(host: str, sock: socket.socket) -> str:
    port = sock.getsockname()[1]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def serve(segmenter: Segmenter, sock: socket.socket, limits: Limits,
          log_level: str = "warning", access: Access | None = None) -> None:
    """Run uvicorn on an already listening socket (see `bind`) until interrupted."""
    import uvicorn

    Image.MAX_IMAGE_PIXELS = limits.max_pixels  # Pillow's own bomb guard agrees with ours
    guard = ConnectionGuard(limits.max_connections, limits.header_timeout)
    config = uvicorn.Config(create_app(segmenter, limits, access), log_level=log_level,
                            access_log=log_level in ("debug", "info"),
                            http=guarded_protocol(guard), proxy_headers=False)
    log_once_per_cause()
    uvicorn.Server(config).run(sockets=[guarded(sock, guard)])

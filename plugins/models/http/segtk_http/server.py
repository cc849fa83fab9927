"""`segtk serve`: expose any segmenter over segtk-http/1 with Starlette on uvicorn.

The model runs in a worker thread, one request at a time (segmenters need not be thread-safe);
every image it labels is counted, and the counts are in GET /info and GET /stats. Memory is
bounded (limits.py): bodies are counted as they stream, chunked or not, sizes are checked
before decoding, and one /predict request at a time is read, decoded and run, so a request
waiting its turn stays unread in the socket.
"""

from __future__ import annotations

import asyncio
import io
import ipaddress
import json
import socket
import threading
import time
from typing import Any

import numpy as np
import torch
from PIL import Image

from segtk.core.errors import SegtkError
from segtk.core.segmenter import Segmenter, check_prediction
from segtk_http.limits import Limits, npz_images, png_images
from segtk_http.protocol import (
    JSON,
    NPZ,
    PROTOCOL,
    LimitError,
    ProtocolError,
    dump_npz,
    encode_png,
    labels_to_wire,
    media_type,
)

SERVER_DEPS = ("uvicorn", "starlette")
SERVER_INSTALL = "pip install -e plugins/models/http  (pulls uvicorn==0.54.0, starlette==1.10.0)"


class ServedModel:
    """The segmenter plus the counters; `predict` is serialised by a lock."""

    def __init__(self, segmenter: Segmenter, limits: Limits) -> None:
        self.segmenter = segmenter
        self.limits = limits
        self.images = 0
        self.requests = 0
        self.errors = 0
        self.started = time.time()
        self._lock = threading.Lock()

    def predict(self, images: np.ndarray) -> np.ndarray:
        with self._lock:
            x = torch.from_numpy(images).to(self.segmenter.device)
            if x.shape[0] == 0:
                labels = torch.empty(0, *x.shape[2:], dtype=torch.long)
            else:
                labels = check_prediction(x, self.segmenter.predict(x), self.segmenter.name)
            self.images += int(x.shape[0])
            self.requests += 1
            return labels.cpu().numpy()

    def stats(self) -> dict[str, Any]:
        return {"served_images": self.images, "served_requests": self.requests,
                "failed_requests": self.errors, "uptime_s": round(time.time() - self.started, 3)}

    def info(self) -> dict[str, Any]:
        m = self.segmenter
        return {"protocol": PROTOCOL, "name": m.name, "classes": list(m.classes),
                "ignore_index": int(m.ignore_index), **self.limits.info(),
                "formats": [NPZ, JSON], **self.stats()}


def create_app(segmenter: Segmenter, limits: Limits | None = None):
    """The Starlette app serving `segmenter` (importable for embedding in another ASGI app)."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    limits = limits or Limits()
    served = ServedModel(segmenter, limits)
    turn = asyncio.Semaphore(1)  # one body in memory at a time; the rest wait unread

    def error(status: int, message: str) -> JSONResponse:
        served.errors += 1
        return JSONResponse({"error": message}, status_code=status)

    async def info(request: Request) -> JSONResponse:
        return JSONResponse(served.info())

    async def stats(request: Request) -> JSONResponse:
        return JSONResponse(served.stats())

    async def predict(request: Request) -> Response:
        kind = media_type(request.headers.get("content-type"))
        if kind not in (JSON, NPZ, "application/octet-stream", ""):
            return error(415, f"unsupported content type {kind!r}; send {NPZ} or {JSON}")
        async with turn:
            try:
                body = await read_body(request, limits.max_body_bytes)
                decode = json_request if kind == JSON else npz_images
                images = await run_in_threadpool(decode, body, limits)
            except ProtocolError as exc:
                return error(exc.status, str(exc))
            del body
            try:
                labels = labels_to_wire(await run_in_threadpool(served.predict, images))
            except Exception as exc:  # the model's own failure: report it, keep serving
                return error(500, f"the model raised {type(exc).__name__}: {exc}")
        if kind == JSON:
            return JSONResponse({"labels": [encode_png(lab) for lab in labels],
                                 "dtype": str(labels.dtype)})
        return Response(dump_npz(labels=labels), media_type=NPZ)

    app = Starlette(routes=[
        Route("/info", info, methods=["GET"]),
        Route("/stats", stats, methods=["GET"]),
        Route("/predict", predict, methods=["POST"]),
    ])
    app.state.served = served
    return app


async def read_body(request, limit: int) -> io.BytesIO:
    """The body, counted as it streams (Content-Length or chunked): 413 past `limit` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise LimitError(f"body of {declared} bytes is over the server's limit of {limit} "
                         "(segtk serve --max-body-mb); send fewer images per request")
    buf, size = io.BytesIO(), 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise LimitError(f"body is over the server's limit of {limit} bytes (segtk serve "
                             "--max-body-mb); send fewer images per request")
        buf.write(chunk)
    buf.seek(0)
    return buf


def json_request(body: io.BytesIO, limits: Limits) -> np.ndarray:
    try:
        payload = json.loads(body.getvalue())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"body is not JSON ({exc})") from exc
    body.close()
    return png_images(payload, limits)


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


def bind_warning(host: str) -> str | None:
    """One line to print when `host` is not a loopback address (the server has no auth)."""
    try:
        addresses = {ipaddress.ip_address(host.strip("[]"))}
    except ValueError:  # a name: every address it resolves to must be loopback
        try:
            addresses = {ipaddress.ip_address(info[4][0].split("%")[0])
                         for info in socket.getaddrinfo(host, None)}
        except (OSError, ValueError):
            addresses = set()
    if addresses and all(a.is_loopback for a in addresses):
        return None
    return (f"warning: serving on {host}, which is not a loopback address: anyone who can "
            "reach it can query the model (there is no authentication); use --host 127.0.0.1 "
            "unless the network is trusted")


def url_of(host: str, sock: socket.socket) -> str:
    port = sock.getsockname()[1]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def serve(segmenter: Segmenter, sock: socket.socket, limits: Limits,
          log_level: str = "warning") -> None:
    """Run uvicorn on an already listening socket (see `bind`) until interrupted."""
    import uvicorn

    Image.MAX_IMAGE_PIXELS = limits.max_pixels  # Pillow's own bomb guard agrees with ours
    config = uvicorn.Config(create_app(segmenter, limits), log_level=log_level,
                            access_log=log_level in ("debug", "info"))
    uvicorn.Server(config).run(sockets=[sock])

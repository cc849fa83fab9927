"""`segtk serve`: expose any segmenter over segtk-http/1 with Starlette on uvicorn.

The model runs in a worker thread, one request at a time (segmenters need not be thread-safe);
every image it labels is counted, and the counts are in GET /info and GET /stats.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import numpy as np
import torch

from segtk.core.segmenter import Segmenter, check_prediction
from segtk_http.protocol import (
    JSON,
    NPZ,
    PROTOCOL,
    ProtocolError,
    dump_npz,
    encode_png,
    images_to_float,
    json_images,
    labels_to_wire,
    load_npz,
    media_type,
)

SERVER_DEPS = ("uvicorn", "starlette")
SERVER_INSTALL = "pip install -e plugins/models/http  (pulls uvicorn==0.54.0, starlette==1.10.0)"


class ServedModel:
    """The segmenter plus the counters; `predict` is serialised by a lock."""

    def __init__(self, segmenter: Segmenter, max_batch: int = 64) -> None:
        self.segmenter = segmenter
        self.max_batch = max_batch
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
                "ignore_index": int(m.ignore_index), "max_batch": self.max_batch,
                "formats": [NPZ, JSON], **self.stats()}


def create_app(segmenter: Segmenter, max_batch: int = 64, max_bytes: int = 512 * 2**20):
    """The Starlette app serving `segmenter` (importable for embedding in another ASGI app)."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    served = ServedModel(segmenter, max_batch)

    def error(status: int, message: str) -> JSONResponse:
        served.errors += 1
        return JSONResponse({"error": message}, status_code=status)

    async def info(request: Request) -> JSONResponse:
        return JSONResponse(served.info())

    async def stats(request: Request) -> JSONResponse:
        return JSONResponse(served.stats())

    async def predict(request: Request) -> Response:
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > max_bytes:
            return error(413, f"body of {length} bytes is over the server's limit of {max_bytes}")
        body = await request.body()
        kind = media_type(request.headers.get("content-type"))
        try:
            if kind == JSON:
                try:
                    payload = json.loads(body)
                except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                    raise ProtocolError(f"body is not JSON ({exc})") from exc
                images = await run_in_threadpool(json_images, payload)
            elif kind in (NPZ, "application/octet-stream", ""):
                images = images_to_float(await run_in_threadpool(load_npz, body, "images"))
            else:
                return error(415, f"unsupported content type {kind!r}; send {NPZ} or {JSON}")
        except ProtocolError as exc:
            return error(400, str(exc))
        if images.shape[0] > max_batch:
            return error(413, f"{images.shape[0]} images in one request, the server takes at "
                              f"most {max_batch}; split the batch")
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


def serve(segmenter: Segmenter, host: str, port: int, max_batch: int = 64,
          log_level: str = "warning") -> None:
    import uvicorn

    uvicorn.run(create_app(segmenter, max_batch), host=host, port=port, log_level=log_level,
                access_log=log_level in ("debug", "info"))

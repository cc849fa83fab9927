"""segtk plugin: segmenters behind HTTP — the real black-box setting.

`--model http://HOST:PORT` queries a segtk-http/1 server (README.md); `segtk serve` is one.
"""

from __future__ import annotations

from segtk.core import SegmenterPlugin, hookimpl
from segtk_http.client import SYNTAX, HttpSegmenter, load
from segtk_http.protocol import PROTOCOL

__all__ = ["PROTOCOL", "HttpSegmenter", "load"]
__version__ = "0.1.0"


@hookimpl
def register_models(register) -> None:
    register(SegmenterPlugin(
        name="http",
        load=load,
        syntax=SYNTAX,
        example="--model http://127.0.0.1:8000",
        description=f"a remote model speaking {PROTOCOL} (labels only: a true black box)",
        requires=("numpy",),
        install="pip install -e plugins/models/http",
    ))


@hookimpl
def register_commands(cli) -> None:
    from segtk_http.cli import serve

    cli.add_command(serve)

"""`segtk serve --model SPEC --host 127.0.0.1 --port 8000`."""

from __future__ import annotations

from dataclasses import replace

import click

from segtk.core import DEVICE_OPTION, PluginError, load_segmenter, missing_modules
from segtk_http.budget import DEFAULT_MEMORY_MB, plan_limits
from segtk_http.limits import MIB, Limits


@click.command("serve")
@click.option("--model", "model_spec", default="demo", show_default=True,
              help="Model spec PLUGIN:ARG to serve (see `segtk models`).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Interface to listen on (0.0.0.0 exposes the model to the network).")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True)
@click.option("--max-batch", type=click.IntRange(min=1), default=64, show_default=True,
              help="Most images accepted in one request.")
@click.option("--memory-mb", type=click.IntRange(min=1), default=DEFAULT_MEMORY_MB,
              show_default=True,
              help="Memory budget of the server process (RSS): the forward pass is sized so the "
                   "largest admitted request stays under it (see --forward-pixels).")
@click.option("--max-pixels", type=click.IntRange(min=1), default=None,
              help="Most pixels (H*W) of one image; bigger ones get 413 before decoding. "
                   "[default: what one forward pass may take]")
@click.option("--max-request-pixels", type=click.IntRange(min=1), default=4096 * 4096,
              show_default=True,
              help="Most pixels of all images of one request (decoded, labelled and answered "
                   "at 32 bytes each within --memory-mb).")
@click.option("--forward-pixels", type=click.IntRange(min=1), default=None,
              help="Most pixels the model sees in one forward pass; bigger requests run in "
                   "chunks of whole images. [default: what --memory-mb leaves, from the "
                   "model's cost per pixel measured at start-up]")
@click.option("--max-body-mb", type=click.FloatRange(min=0, min_open=True), default=64.0,
              show_default=True, help="Largest request body in MiB, chunked or not.")
@click.option("--body-buffer-mb", type=click.FloatRange(min=0, min_open=True), default=256.0,
              show_default=True,
              help="Most MiB of request bodies being received at once, all clients together; "
                   "a body that would pass it gets 503 (clients retry).")
@click.option("--body-timeout", type=click.FloatRange(min=0, min_open=True), default=30.0,
              show_default=True,
              help="Seconds a client has to send a whole body; a slower one gets 408.")
@click.option("--max-connections", type=click.IntRange(min=1), default=None,
              help="Most connections open at once; at the cap a new one closes the longest-idle "
                   "one, or gets 503 when all are busy. [default: what the open-file limit "
                   "leaves, at most 1000]")
@click.option("--header-timeout", type=click.FloatRange(min=0, min_open=True), default=10.0,
              show_default=True,
              help="Seconds a connection may stay open without sending a request's headers "
                   "(from when it opened, or its last answer); then it is closed.")
@click.option("--token", envvar="SEGTK_TOKEN", show_envvar=True, default=None,
              help="Require `Authorization: Bearer TOKEN` on every request (401 otherwise); the "
                   "segtk client sends $SEGTK_TOKEN. Prefer the variable: options show in ps.")
@click.option("--allow-host", "allow_hosts", multiple=True, metavar="NAME",
              help="Also serve requests whose Host header names NAME (repeatable; '*': any). "
                   "On a loopback --host only localhost, 127.0.0.1 and [::1] are served, so a "
                   "web page cannot reach the model by rebinding its DNS name.")
@click.option("--log-level", type=click.Choice(["critical", "error", "warning", "info", "debug"]),
              default="warning", show_default=True)
@click.option("--device", **DEVICE_OPTION)
def serve(model_spec: str, host: str, port: int, max_batch: int, memory_mb: int,
          max_pixels: int | None, max_request_pixels: int, forward_pixels: int | None,
          max_body_mb: float, body_buffer_mb: float, body_timeout: float,
          max_connections: int | None, header_timeout: float, token: str | None,
          allow_hosts: tuple[str, ...], log_level: str, device: str | None) -> None:
    """Serve a model over HTTP (segtk-http/1) so attacks can query it as a black box.

    The address is printed once the socket listens (the real port for --port 0). Sizes are
    checked before decoding, so image bombs are refused (413) without using memory, and the
    model's forward pass is sized at start-up so the largest admitted request fits
    --memory-mb. Bodies are received outside the model's turn: a slow client holds only its
    own bytes. Connections are capped below the open-file limit and must send their headers
    within --header-timeout; on a loopback --host only loopback Host names are served; --token
    (or SEGTK_TOKEN) makes every request need the token.

    \b
    Examples:
      segtk serve --model demo --port 8000
      segtk attack --plugin dla --model http://127.0.0.1:8000
      curl http://127.0.0.1:8000/stats      # images served so far
    """
    from segtk_http.server import SERVER_DEPS, SERVER_INSTALL

    missing = missing_modules(SERVER_DEPS)
    if missing:
        raise PluginError(f"segtk serve needs {', '.join(missing)}, which is not installed",
                          hint=SERVER_INSTALL)
    from segtk_http.guard import Access, allowed_hosts, check_token, connection_cap
    from segtk_http.server import bind, bind_warning, url_of
    from segtk_http.server import serve as run_server

    access = Access(token=check_token(token), hosts=allowed_hosts(host, allow_hosts))
    connections = connection_cap(max_connections)  # argument checks first: loading costs memory
    base = Limits(max_batch=max_batch, max_request_pixels=max_request_pixels,
                  max_pixels=min(Limits.max_pixels, max_request_pixels),
                  max_body_bytes=int(max_body_mb * MIB),
                  max_buffered_bytes=int(body_buffer_mb * MIB), body_timeout=body_timeout,
                  header_timeout=header_timeout)
    model = load_segmenter(model_spec, device)
    limits, budget = plan_limits(model, memory_mb * MIB, base, max_pixels, forward_pixels)
    click.echo(f"{budget.describe()}: at most {limits.max_forward_pixels} pixels per forward "
               f"pass, {limits.max_pixels} per image", err=True)
    limits = replace(limits, max_connections=connections)
    click.echo(f"at most {limits.max_connections} connections at once, each sending its request "
               f"headers within {limits.header_timeout:g} s"
               f"{'; every request needs the token' if access.token else ''}", err=True)
    sock = bind(host, port)
    warning = bind_warning(host, token=access.token is not None)
    if warning:
        click.echo(warning, err=True)
    click.echo(f"serving {model.name} ({model.num_classes} classes) at {url_of(host, sock)} "
               f"(GET /info, GET /stats, POST /predict)", err=True)
    run_server(model, sock, limits, log_level, access)

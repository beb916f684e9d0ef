"""The HTTP server of Milvus's RESTful API v2, in the proxy process beside its gRPC server.

Milvus multiplexes REST onto its gRPC port; grpcio cannot share a port with an HTTP/1.1
server, so Vectide serves REST on its own port (``service.http_port``, as Milvus's
``proxy.http.port`` option does). aiohttp runs on an event loop in its own thread, and every
request runs in a thread pool: the handlers block on the proxy core exactly as gRPC's worker
threads do, and neither server waits for the other.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import threading
from concurrent.futures import ThreadPoolExecutor

from aiohttp import web

from vectide.services.common.errors import Code
from vectide.services.proxy.rest_api import RestApi

log = logging.getLogger(__name__)

#: the largest body accepted, as the gRPC port's limit (Milvus's 64 MB)
MAX_BODY_BYTES = 64 * 1024 * 1024


class RestServer:
    """Serves :class:`RestApi` at ``POST /v2/vectordb/...`` on ``host:port``."""

    def __init__(
        self,
        api: RestApi,
        host: str,
        port: int,
        workers: int = 16,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._api = api
        #: HTTPS when set (``security.tls_mode``), with the gRPC port's certificate
        self._ssl = ssl_context
        self._host = host
        self._port = port
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rest")
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> RestServer:
        """Bind (raising OSError when the port is taken, before anything serves) and serve."""
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        app.router.add_route("*", "/{tail:.*}", self._serve)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        self._loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(
            self._runner,
            self._host or None,
            self._port,
            reuse_address=True,
            ssl_context=self._ssl,
        )
        try:
            self._loop.run_until_complete(site.start())
        except OSError:
            self._loop.run_until_complete(self._runner.cleanup())
            self._runner = None
            self.stop()
            raise
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="rest-http", daemon=True
        )
        self._thread.start()
        log.info("REST API serving", extra={"address": f"{self._host}:{self._port}"})
        return self

    async def _serve(self, request: web.Request) -> web.Response:
        if request.method != "POST":
            return _json({"code": int(Code.UNIMPLEMENTED), "message": "use POST"}, status=405)
        if request.path not in self._api.routes:
            message = f"no such RESTful v2 endpoint: {request.path}"
            return _json({"code": int(Code.UNIMPLEMENTED), "message": message}, status=404)
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            message = f"request body over {MAX_BODY_BYTES} bytes"
            return _json({"code": int(Code.PARAMETER_INVALID), "message": message}, status=413)
        reply = await self._loop.run_in_executor(
            self._pool, self._api.handle, request.path, raw, request.headers
        )
        return _json(reply)

    def stop(self) -> None:
        if self._runner is not None and self._thread is not None:
            future = asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop)
            future.result(timeout=5)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
        self._pool.shutdown(wait=False)
        if not self._loop.is_closed():
            self._loop.close()


def _json(payload: dict[str, object], status: int = 200) -> web.Response:
    """Milvus answers every handled request with HTTP 200 and the outcome in ``code``; the
    body is compact with sorted keys, as Go's encoder writes Milvus's maps."""
    body = json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()
    return web.Response(body=body, status=status, content_type="application/json")

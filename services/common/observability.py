"""Metrics and health over HTTP: one server per process for ``/metrics`` and ``/healthz``.

Kubernetes probes and Prometheus need one port per pod, whatever roles the process hosts
(standalone hosts them all), so roles never open sockets for this. They register health
checks and gauge sources on the process-wide ``OBSERVABILITY``; metrics any module defines
with ``prometheus_client`` (its default ``REGISTRY``) appear on ``/metrics`` as they are.

``/healthz`` answers 200 only when at least one check is registered and every check passes,
else 503; the JSON body names each check with its detail, so a failing probe says why.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric

log = logging.getLogger(__name__)

Unregister = Callable[[], None]


@dataclass(frozen=True)
class Health:
    """One check's verdict; ``detail`` is what an operator reads in a failing probe."""

    ok: bool
    detail: str = ""


HealthCheck = Callable[[], Health]
#: label values (in the gauge's label order) and the value, read at scrape time
Sample = tuple[tuple[str, ...], float]
GaugeSource = Callable[[], Iterable[Sample]]


class StateGauge:
    """A gauge read from the roles' state when scraped, never updated on hot paths.

    Several sources may feed one gauge (two query nodes in one standalone process): their
    samples are merged into one metric family, as the exposition format requires.
    """

    def __init__(self, name: str, documentation: str, labels: tuple[str, ...] = ()) -> None:
        self.name = name
        self._doc = documentation
        self._labels = labels
        self._sources: dict[int, GaugeSource] = {}
        self._keys = itertools.count()
        self._lock = threading.Lock()
        REGISTRY.register(self)

    def add_source(self, source: GaugeSource) -> Unregister:
        key = next(self._keys)
        with self._lock:
            self._sources[key] = source
        return lambda: self._drop(key)

    def _drop(self, key: int) -> None:
        with self._lock:
            self._sources.pop(key, None)

    def describe(self) -> list[Metric]:
        return [GaugeMetricFamily(self.name, self._doc, labels=list(self._labels))]

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(self.name, self._doc, labels=list(self._labels))
        with self._lock:
            sources = list(self._sources.values())
        for source in sources:
            try:
                for labels, value in source():
                    family.add_metric(list(labels), value)
            except Exception:  # a scrape must not fail because one role is stopping
                log.debug("gauge source failed", extra={"gauge": self.name}, exc_info=True)
        yield family


class Observability:
    """The process's health checks and its one HTTP server."""

    def __init__(self) -> None:
        self._checks: dict[int, tuple[str, HealthCheck]] = {}
        self._keys = itertools.count()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._users = 0

    def add_check(self, name: str, check: HealthCheck) -> Unregister:
        key = next(self._keys)
        with self._lock:
            self._checks[key] = (name, check)
        return lambda: self._remove_check(key)

    def _remove_check(self, key: int) -> None:
        with self._lock:
            self._checks.pop(key, None)

    def health(self) -> tuple[bool, dict[str, Health]]:
        """Run every check; healthy when there is at least one and all pass."""
        with self._lock:
            checks = list(self._checks.values())
        results: dict[str, Health] = {}
        for name, check in checks:
            try:
                result = check()
            except Exception as exc:  # a crashing check is a failing one, not a 500
                result = Health(False, f"check raised {type(exc).__name__}: {exc}")
            key, n = name, 2
            while key in results:
                key, n = f"{name}-{n}", n + 1
            results[key] = result
        return bool(results) and all(r.ok for r in results.values()), results

    def serve(self, host: str, port: int) -> Unregister:
        """Start the HTTP server unless this process already runs it; returns the release
        function (the server stops when its last user releases it)."""
        with self._lock:
            if self._server is None:
                try:
                    self._server = ThreadingHTTPServer((host, port), _handler(self))
                except OSError as exc:
                    raise OSError(
                        exc.errno,
                        f"cannot serve /metrics and /healthz on {host}:{port}: {exc.strerror} "
                        "(set service.metrics_port, or --metrics-port for one role)",
                    ) from exc
                self._server.daemon_threads = True
                threading.Thread(
                    target=self._server.serve_forever, name="observability-http", daemon=True
                ).start()
                log.info("metrics and health serving", extra={"address": f"{host}:{port}"})
            elif self._server.server_address[1] != port:
                log.info(
                    "metrics server already running on another port",
                    extra={"port": self._server.server_address[1], "asked": port},
                )
            self._users += 1
        return self._release

    @property
    def port(self) -> int | None:
        with self._lock:
            return None if self._server is None else int(self._server.server_address[1])

    def _release(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users > 0 or self._server is None:
                return
            server, self._server = self._server, None
        server.shutdown()
        server.server_close()


def _handler(obs: Observability) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._reply(200, CONTENT_TYPE_LATEST, generate_latest(REGISTRY))
            elif path in ("/healthz", "/health"):
                ok, results = obs.health()
                body = {
                    "status": "ok" if ok else "unhealthy",
                    "checks": {n: {"ok": r.ok, "detail": r.detail} for n, r in results.items()},
                }
                if not results:
                    body["status"] = "starting: no role registered yet"
                self._reply(200 if ok else 503, "application/json", json.dumps(body).encode())
            else:
                self._reply(404, "text/plain", b"not found: /metrics or /healthz\n")

        def _reply(self, code: int, content_type: str, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            """Probes hit this every few seconds: keep them out of the logs."""

    return Handler


#: The process's one instance: roles register here, the launcher serves it.
OBSERVABILITY = Observability()

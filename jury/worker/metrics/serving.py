"""Where a process serves its metrics: an HTTP server (prometheus-client's, in a daemon thread)
on the first free port of a range, answering `GET /metrics` in Prometheus' text format.

A worker process serves its own (JURY_METRICS_PORT on JURY_METRICS_ADDRESS); `jury exporter`
serves the fleet's (jury.worker.metrics.exporter). Relied on, read in prometheus-client
0.26.0 (exposition.py): `start_http_server` binds at once (wsgiref's make_server), raising
OSError when the port is taken, and serves from a daemon thread it starts itself.
"""

from __future__ import annotations

import errno
import logging
from wsgiref.simple_server import WSGIServer

from prometheus_client import REGISTRY, CollectorRegistry, start_http_server

from jury.errors import ConfigurationError
from jury.settings import Settings
from jury.worker.metrics.recording import switch_on

log = logging.getLogger("jury.worker")


def serve(ports: range, address: str, registry: CollectorRegistry) -> tuple[WSGIServer, int]:
    """Serve `registry` on the first free port of `ports`; returns the server and its port.
    Raises ConfigurationError when every port is taken or the address is not this host's."""
    for port in ports:
        try:
            server, _thread = start_http_server(port, address, registry)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                continue
            raise ConfigurationError(
                f"cannot serve metrics on {address}:{port}: {exc.strerror or exc}. Set "
                "JURY_METRICS_ADDRESS to an address of this host (127.0.0.1, or 0.0.0.0 for "
                "every interface)."
            ) from None
        return server, port
    named = f"{ports.start}" if len(ports) == 1 else f"{ports.start}-{ports.stop - 1}"
    raise ConfigurationError(
        f"no free port for metrics in {named} on {address}: each is in use (another worker "
        "on this host?). Give each worker on a host a port of its own, or a range "
        "(JURY_METRICS_PORT=9464-9471) of which each takes the first free one."
    )


def serve_worker_metrics(
    settings: Settings, registry: CollectorRegistry = REGISTRY
) -> WSGIServer | None:
    """A worker process's metrics: recorded and served if JURY_METRICS_PORT names a port
    (raises ConfigurationError if none is free); None, and nothing recorded, if not."""
    if not settings.metrics_ports:
        return None
    server, port = serve(settings.metrics_ports, settings.metrics_address, registry)
    switch_on(registry)
    log.info("metrics for Prometheus at http://%s:%d/metrics", settings.metrics_address, port)
    return server

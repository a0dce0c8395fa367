"""`jury exporter`: the fleet's metrics (jury.worker.metrics.fleet) for Prometheus, one
process per deployment, beside the workers that serve their own."""

from __future__ import annotations

import signal
import sys
import threading
from typing import TextIO

from prometheus_client import CollectorRegistry, generate_latest

from jury.broker.redis_client import BrokerRedis
from jury.settings import Settings
from jury.store.engine import session_factory
from jury.worker.metrics.fleet import FleetCollector
from jury.worker.metrics.serving import serve


def fleet_registry(settings: Settings, broker: BrokerRedis) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(FleetCollector(settings, broker, session_factory(settings.database_url)))
    return registry


def run_exporter(
    settings: Settings, port: int, address: str, once: bool = False, out: TextIO = sys.stdout
) -> int:
    """Serve the fleet's metrics on `address`:`port` until SIGTERM or SIGINT; with `once`,
    print them once instead. Raises ConfigurationError when Redis, the store or the port
    cannot be had."""
    broker = BrokerRedis.from_settings(settings)
    try:
        registry = fleet_registry(settings, broker)
        if once:
            out.write(generate_latest(registry).decode())
            return 0
        server, _ = serve(range(port, port + 1), address, registry)
        print(
            f"jury exporter: the fleet's metrics at http://{address}:{port}/metrics "
            f"(deployment {settings.queue})",
            file=sys.stderr,
            flush=True,
        )
        stopped = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stopped.set())
        while not stopped.wait(1.0):
            pass
        server.shutdown()
        return 0
    finally:
        broker.close()

"""Metrics for Prometheus (docs/monitoring.md): what each worker process records about its own
calls (recording), where it serves them (serving), and the fleet's figures that live in Redis
and the store, served once for the whole deployment by `jury exporter` (fleet, exporter).
"""

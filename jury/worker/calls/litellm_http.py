"""LiteLLM's HTTP clients, as a worker runs them: every request behind the egress policy and
the reply bound (jury.worker.calls.guarded_transport), and the OpenAI provider's requests
through one hooked session that runs the send gate's wait (jury.worker.calls.send_wait).

Imported by llm_client only (it imports LiteLLM's HTTP handler).
"""

from __future__ import annotations

import functools
import os
import ssl
from typing import Any

import httpx
import litellm
from litellm.llms.custom_httpx import http_handler
from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler
from litellm.llms.openai.common_utils import BaseOpenAILLM

from jury.worker.calls.guarded_transport import GuardedTransport
from jury.worker.calls.send_wait import at_http_send

# No cap on connections: the worker's window (JURY_WORKER_CONCURRENCY at most) bounds the calls.
# httpx's default pool holds 100 connections, and LiteLLM's aiohttp transport 1,000 and 500 per
# host (AIOHTTP_CONNECTOR_LIMIT, AIOHTTP_CONNECTOR_LIMIT_PER_HOST in litellm/constants.py,
# read at import and looked up by `create_aiohttp_transport` when it builds a connector): a
# window of thousands against one slow provider would queue behind them.
UNBOUNDED = httpx.Limits(max_connections=None, max_keepalive_connections=None)


def _unbounded_connectors() -> None:
    """LiteLLM's aiohttp connectors without a cap, unless the operator set one."""
    for name in ("AIOHTTP_CONNECTOR_LIMIT", "AIOHTTP_CONNECTOR_LIMIT_PER_HOST"):
        if name not in os.environ:
            setattr(http_handler, name, 0)


def _guarded_transports() -> None:
    """Wrap every async transport LiteLLM builds in GuardedTransport. Its HTTP clients, the
    OpenAI SDK's session (`BaseOpenAILLM._get_async_http_client`) and every other provider's
    (`AsyncHTTPHandler.create_client`, cached per provider by `get_async_httpx_client`), all
    get their transport from `AsyncHTTPHandler.create_async_transport` (read in LiteLLM
    1.106, litellm/llms/custom_httpx/http_handler.py and litellm/llms/openai/common_utils.py):
    a call of any provider then passes the policy, request by request, redirects included."""
    original = AsyncHTTPHandler.create_async_transport

    def guarded(
        ssl_context: ssl.SSLContext | None = None,
        ssl_verify: bool | None = None,
        shared_session: Any = None,
    ) -> httpx.AsyncBaseTransport:
        inner: httpx.AsyncBaseTransport | None = original(
            ssl_context=ssl_context, ssl_verify=ssl_verify, shared_session=shared_session
        )
        if inner is None:  # LiteLLM's httpx mode: the client would build httpx's own
            verify: ssl.SSLContext | bool = (
                ssl_context if ssl_context is not None else ssl_verify is not False
            )
            inner = httpx.AsyncHTTPTransport(verify=verify, limits=UNBOUNDED)
        return GuardedTransport(inner)

    AsyncHTTPHandler.create_async_transport = staticmethod(guarded)  # type: ignore[assignment]
    AsyncHTTPHandler._create_async_transport = staticmethod(guarded)  # type: ignore[assignment]


@functools.cache
def install_send_hook() -> None:
    """Guard LiteLLM's transports, then route its OpenAI-compatible calls through one HTTP
    client whose request hook runs the call's send-gate wait. LiteLLM wraps
    `litellm.aclient_session` in every OpenAI SDK client it builds, when one is set, and never
    closes it (litellm/llms/openai/common_utils.py: `_get_async_http_client`,
    `owns_wrapped_http_client`); the session is built as LiteLLM builds its own (its aiohttp
    transport, which follows the running event loop), guarded, with the hook added, and
    follows no redirect (the guard refuses them anyway). Once per process, before LiteLLM
    builds and caches any client."""
    _unbounded_connectors()
    _guarded_transports()
    if litellm.aclient_session is None:
        litellm.aclient_session = BaseOpenAILLM._get_async_http_client()
    session = litellm.aclient_session
    if session is not None:
        session.follow_redirects = False
        if at_http_send not in session.event_hooks["request"]:
            hooks = session.event_hooks
            session.event_hooks = {**hooks, "request": [*hooks["request"], at_http_send]}

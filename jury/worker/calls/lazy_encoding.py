"""LiteLLM's default tokenizer, loaded only if a call's path ever uses it.

LiteLLM hands every provider handler its default tokenizer, tiktoken's cl100k_base (`encoding=
_get_encoding()` at each `completion` branch of litellm/main.py), loading it at the first call
whatever the provider does with it. jury's wire (jury.worker.calls.openai_wire) never uses
it, nor does LiteLLM's OpenAI handler on a reply that carries its usage; yet the load costs
a worker process about 40 MB of memory and 0.13 s of CPU. `_get_encoding` returns
`litellm.main._encoding_cache` once it is set (litellm/main.py): set to this stand-in, the
real tokenizer is loaded (through LiteLLM's own `litellm.main.encoding`) at its first use.
"""

from __future__ import annotations

import threading
from typing import Any


class EncodingOnFirstUse:
    """Stands in for LiteLLM's tokenizer: any attribute read loads the real one."""

    def __init__(self) -> None:
        self._real: Any = None
        self._lock = threading.Lock()

    def loaded(self) -> bool:
        return self._real is not None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # copy, pickle and the like: not a use of the tokenizer
            raise AttributeError(name)
        real = self._real
        if real is None:
            with self._lock:
                if self._real is None:
                    import litellm

                    # LiteLLM's own lazy load (litellm/main.py, module `__getattr__`).
                    self._real = litellm.main.__getattr__("encoding")
                real = self._real
        return getattr(real, name)


def defer_default_encoding() -> EncodingOnFirstUse | None:
    """Put the stand-in in LiteLLM's cache, unless the real tokenizer is there already;
    returns the stand-in in place."""
    import litellm

    current: Any = getattr(litellm.main, "_encoding_cache", None)
    if current is None:
        current = EncodingOnFirstUse()
        litellm.main._encoding_cache = current
    return current if isinstance(current, EncodingOnFirstUse) else None

"""Backends behind one protocol; built lazily from a model spec so SDKs load only when used.

What a provider can do is declared in :mod:`~pytest_longctx.backends.registry`; the rest of the plugin
asks it (``provider_of(spec).batches``) and never tests a provider's name.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pytest_longctx.backends.base import Backend, Completion, Message, Request, request_key
from pytest_longctx.backends.models import ModelSpec
from pytest_longctx.backends.registry import Provider, load, offering, provider_of

__all__ = ["Backend", "Completion", "Message", "Provider", "Request", "build_backend", "missing_key_message",
           "offering", "provider_of", "request_key", "start_model_server"]


def build_backend(spec: ModelSpec, *, context_window: int, **options: Any) -> Backend:
    """Import the provider's module and construct its backend.

    ``options`` carries provider-specific settings (e.g. ``base_url`` of the shared local server).
    """
    cls = load(provider_of(spec).backend)
    backend: Backend = cls(spec.name, context_window=context_window, **options)
    return backend


def missing_key_message(provider: str) -> str | None:
    """One line when ``provider`` needs an API key the environment does not hold; None when it has what it needs."""
    check = provider_of(provider).key_check
    if not check:
        return None
    message: str | None = load(check)()
    return message


def start_model_server(spec: ModelSpec, cache_dir: Path, *, share_running: bool = True) -> tuple[str, Any]:
    """Start the shared model server of a ``local_server`` provider: its URL and a handle to ``stop()``.

    With ``share_running``, a server the environment already names (``$PYTEST_LONGCTX_LOCAL_URL``, set by
    the user or a test) is shared instead, and the handle is None.
    """
    from pytest_longctx.backends.local_server import URL_ENV, LocalModelServer

    if share_running and os.environ.get(URL_ENV):
        return os.environ[URL_ENV].rstrip("/"), None
    server = LocalModelServer(spec.name, cache_dir=cache_dir)
    return server.start(), server

"""Backends behind one protocol; built lazily from a model spec so SDKs load only when used.

What a provider can do is declared in :mod:`~pytest_longctx.backends.registry`; the rest of the plugin
asks it (``provider_of(spec).batches``) and never tests a provider's name.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pytest_longctx.backends.base import Backend, Completion, Message, Request, request_key
from pytest_longctx.backends.model_spec import ModelSpec
from pytest_longctx.backends.prices import Price, parse_prices, price_of, source_text
from pytest_longctx.backends.registry import REFERENCE_MODEL, Provider, load, offering, provider_of
from pytest_longctx.backends.retry import ATTEMPT_WATCH, AttemptWatch, Verdict

__all__ = ["ATTEMPT_WATCH", "REFERENCE_MODEL", "AttemptWatch", "Backend", "Completion", "Message", "Price", "Provider",
           "Request", "Verdict", "build_backend",
           "missing_key_message", "model_note", "offering", "parse_prices", "price_of", "provider_of",
           "repeated_warnings", "request_key", "source_text", "start_model_server"]


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


def model_note(spec: ModelSpec) -> str | None:
    """One line about the model (its provider's ``model_note``: what it is, a deprecation), or None."""
    note = provider_of(spec).model_note
    return load(note)(spec.name) if note else None


def repeated_warnings(spec: ModelSpec) -> list[str]:
    """Messages (regular expressions) of the ``DeprecationWarning`` s the provider's SDK repeats per request."""
    target = provider_of(spec).repeated_warnings
    return list(load(target)(spec.name)) if target else []


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

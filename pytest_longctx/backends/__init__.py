"""Backends behind one protocol; built lazily from a model spec so SDKs load only when used."""

from __future__ import annotations

import importlib
from typing import Any

from pytest_longctx.backends.base import Backend, Completion, Message, Request, request_key
from pytest_longctx.backends.models import BACKENDS, ModelSpec

__all__ = ["Backend", "Completion", "Message", "Request", "build_backend", "missing_key_message", "request_key"]


def build_backend(spec: ModelSpec, *, context_window: int, **options: Any) -> Backend:
    """Import the provider's module and construct its backend.

    ``options`` carries provider-specific settings (e.g. ``base_url`` of the shared local server).
    """
    module_name, _, class_name = BACKENDS[spec.provider].partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    backend: Backend = cls(spec.name, context_window=context_window, **options)
    return backend


def missing_key_message(provider: str) -> str | None:
    """One line when ``provider`` needs an API key the environment does not hold; None when it has what it needs."""
    import os

    if provider == "anthropic" and not os.environ.get("ANTHROPIC_API_KEY"):
        from pytest_longctx.backends.anthropic import missing_key_message as anthropic_message

        return anthropic_message()
    if provider == "openai":
        from pytest_longctx.backends.openai_compat import missing_key_message as openai_message

        return openai_message()
    return None

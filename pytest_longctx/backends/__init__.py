"""Backends behind one protocol; built lazily from a model spec so SDKs load only when used."""

from __future__ import annotations

import importlib
from typing import Any

from pytest_longctx.backends.base import Backend, Completion, Message, Request, request_key
from pytest_longctx.models import BACKENDS, ModelSpec

__all__ = ["Backend", "Completion", "Message", "Request", "build_backend", "request_key"]


def build_backend(spec: ModelSpec, *, context_window: int, **options: Any) -> Backend:
    """Import the provider's module and construct its backend.

    ``options`` carries provider-specific settings (e.g. ``base_url`` of the shared local server).
    """
    module_name, _, class_name = BACKENDS[spec.provider].partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    backend: Backend = cls(spec.name, context_window=context_window, **options)
    return backend

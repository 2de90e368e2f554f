"""pytest-longctx: measure LLM accuracy over long contexts with pytest, and gate upgrades on it."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = [
    "GATE_ERROR_EXIT_CODE",
    "GATE_EXIT_CODE",
    "Oracle",
    "Request",
    "Trial",
    "__version__",
]

from pytest_longctx.backends.base import Request
from pytest_longctx.backends.fake import Oracle
from pytest_longctx.results.gating import GATE_ERROR_EXIT_CODE, GATE_EXIT_CODE
from pytest_longctx.session.trial import Trial

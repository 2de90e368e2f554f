"""A local Anthropic Messages API server (also speaking OpenAI's chat completions) with fault injection.

Run it in-process (``with MessagesServer(...) as srv: srv.base_url``) or as a separate process
(``python -m pytest_longctx.server --port 0``), and point the real ``anthropic`` SDK at it.
"""

from __future__ import annotations

from .faults import FAULT_KINDS, STICKY_MODES, FaultPlan
from .graded import Graded, GradedSpec, Verdict, parse_spec
from .messages_api import MessagesServer
from .resolve import resolve_responder
from .responders import (
    Responder,
    Scripted,
    TokenCounter,
    approx_token_count,
    count_input_tokens,
    echo,
    fixed,
    prefill_text,
)
from .stats import ServerStats, fetch_stats
from .wire import RateLimits

__all__ = [
    "FAULT_KINDS",
    "STICKY_MODES",
    "FaultPlan",
    "Graded",
    "GradedSpec",
    "MessagesServer",
    "RateLimits",
    "Responder",
    "Scripted",
    "ServerStats",
    "TokenCounter",
    "Verdict",
    "approx_token_count",
    "count_input_tokens",
    "echo",
    "fetch_stats",
    "fixed",
    "parse_spec",
    "prefill_text",
    "resolve_responder",
]

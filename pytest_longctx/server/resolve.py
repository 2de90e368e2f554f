"""Responders by name, for the server's command line and its tests: the plain ones and ``graded:``."""

from __future__ import annotations

import json
from pathlib import Path

from .graded import Graded
from .responders import Responder, Scripted, TokenCounter, approx_token_count, echo, fixed


def resolve_responder(spec: str | Responder, counter: TokenCounter = approx_token_count) -> Responder:
    """A responder from a callable or a name: ``echo``, ``fixed:<text>``, ``scripted:<file.json>``, ``graded:<spec>``.

    The JSON file of ``scripted:`` holds a list of replies, a mapping of substring to reply, or
    ``{"replies": [...] or {...}, "default": "..."}``. ``graded:`` is a model of known accuracy on the suite's
    experiments (:mod:`.graded`; ``counter`` measures its prompts for an accuracy that depends on length).
    """
    if callable(spec):
        return spec
    name, _, arg = spec.partition(":")
    if name == "graded":
        return Graded(arg, counter)
    if name == "echo" and not arg:
        return echo
    if name == "fixed":
        return fixed(arg)
    if name == "scripted" and arg:
        data = json.loads(Path(arg).read_text(encoding="utf-8"))
        if isinstance(data, dict) and "replies" in data:
            return Scripted(data["replies"], default=data.get("default"))
        return Scripted(data)
    raise ValueError(f"unknown responder {spec!r}; expected echo, fixed:<text>, scripted:<file.json> or graded:<spec>")

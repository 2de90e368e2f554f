"""Prompt templates, each with an id and a version, kept in one place (``templates.py``)."""

from __future__ import annotations

from pytest_longctx.prompts.templates import TEMPLATES, Template, get

__all__ = ["TEMPLATES", "Template", "get"]

"""Placeholder replaced by the HTML report module."""

from __future__ import annotations

import html
import json
from typing import Any


def render_html(record: dict[str, Any]) -> str:
    body = html.escape(json.dumps(record["cells"], indent=1))
    return f"<!doctype html><meta charset=utf-8><title>longctx</title><pre>{body}</pre>"

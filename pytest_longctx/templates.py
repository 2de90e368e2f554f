"""A prompt template: a named, versioned format string. Change a template's text → bump its version.

Requests record ``id@version`` and cache keys use it, so an edited prompt never reads a stale answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Template:
    """A named, versioned format string."""

    id: str
    version: int
    text: str

    @property
    def ref(self) -> str:
        """``id@version``, recorded in requests and cache keys."""
        return f"{self.id}@{self.version}"

    def render(self, **values: Any) -> str:
        return self.text.format(**values)

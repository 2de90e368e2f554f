"""Words for reports: a noun's plural for a count."""

from __future__ import annotations


def plural(noun: str, n: int) -> str:
    """``noun`` for one, its plural otherwise (``question`` -> ``questions``, ``query`` -> ``queries``)."""
    if n == 1:
        return noun
    return noun[:-1] + "ies" if noun.endswith("y") and not noun.endswith("ey") else noun + "s"

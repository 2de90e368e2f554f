"""Default LRT sizes and shuffle modes, sized to the model's context window."""

from __future__ import annotations

#: cl100k tokens of one register line, measured (e.g. "line 1234: REGISTER_CONTENT is <56789>").
TOKENS_PER_LINE = 14
CANDIDATE_LINES = (200, 500, 1000, 2000, 5000, 10000)


def lrt_lines(window: int) -> list[int]:
    """Line counts whose files fit the window; small CPU models get two short sizes."""
    if window <= 8192:
        return [50, 100]
    fits = [n for n in CANDIDATE_LINES if n * TOKENS_PER_LINE <= window * 0.9]
    return fits[-4:] if len(fits) > 4 else fits


def lrt_shuffles(window: int) -> list[str]:
    if window <= 8192:
        return ["none", "full", "block-10"]
    return ["none", "full", "block-5", "block-20", "block-100"]

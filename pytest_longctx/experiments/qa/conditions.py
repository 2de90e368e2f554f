"""Default condition axes of the QA experiment, sized to the model's context window and the corpus."""

from __future__ import annotations

#: Tokens kept free for instructions, up to five examples, the question and a scratchpad answer.
RESERVE = 2500
#: Candidate sizes; 70,000 and 95,000 are the study's budgets.
CANDIDATES = (2_000, 8_000, 32_000, 70_000, 95_000, 150_000, 190_000)
SMALL_WINDOW = 8192


def qa_sizes(window: int, *, depth: bool = False, capacity: int | None = None) -> list[int]:
    """Context budgets for a model with ``window`` tokens, never more than ``capacity`` (what the corpus fills).

    Small CPU models (window <= 8192) get sizes that keep the default run within minutes on two
    cores; large windows get up to four sizes spread from short to nearly full.
    """
    if window <= SMALL_WINDOW:
        return [1000, 2000] if depth else [1000]
    fits = [c for c in CANDIDATES if c <= window - RESERVE and (capacity is None or c <= capacity)]
    if len(fits) <= 4:
        return fits
    step = (len(fits) - 1) / 3
    return [fits[round(i * step)] for i in range(4)]

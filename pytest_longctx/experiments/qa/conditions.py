"""Default condition axes of the QA experiment, sized to the model's context window and the corpus, and its
defaults for the run's model."""

from __future__ import annotations

from pytest_longctx import Defaults, Settings
from pytest_longctx.experiments.qa.options import QaOptions

#: Tokens kept free for instructions, up to five examples, the question and a scratchpad answer.
RESERVE = 2500
#: Candidate sizes; 70,000 and 95,000 are the study's budgets.
CANDIDATES = (2_000, 8_000, 32_000, 70_000, 95_000, 150_000, 190_000)
SMALL_WINDOW = 8192
#: This experiment's defaults for a small model on the CPU (8K window): 1,000-token contexts, the plain prompt
#: without examples at the beginning, middle and end, no depth sweep, 10 trials a cell (qa and its controls).
CPU_SIZES, CPU_VARIANTS, CPU_SAMPLES = (1000,), ("plain/none",), 10


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


def qa_samples(settings: Settings) -> int | None:
    """Trials per qa (and control) cell this experiment defaults to (None: the core's default for the model)."""
    return CPU_SAMPLES if settings.model.profile.runs == "cpu" else None


def qa_defaults(options: QaOptions, settings: Settings) -> list[Defaults]:
    """Trials per cell of qa and its controls (10 on a CPU model; otherwise the core's default)."""
    n = qa_samples(settings)
    small = {"context_tokens": list(CPU_SIZES), "variants": list(CPU_VARIANTS)} if n is not None else {}
    if options.design == "blocks":  # a remote model: many questions, each in a balanced subset of cells
        from pytest_longctx.experiments.qa.design import SIZES_PER_DEPTH_BLOCK, VARIANTS_PER_BLOCK

        blocks = {"design": "blocks", "variants_per_block": VARIANTS_PER_BLOCK,
                  "sizes_per_depth_block": SIZES_PER_DEPTH_BLOCK}
        why = ("each question in 3 prompt variants at one size at every position, or at 2 sizes at every depth: "
               "256 questions at 20 a cell, so the pooled alarm sees a 5-point drop for today's requests")
        return [Defaults("qa", n, blocks, why), Defaults("qa-baseline", n), Defaults("qa-control", n)]
    return [Defaults("qa", n, small), Defaults("qa-baseline", n), Defaults("qa-control", n)]

"""The LRT's condition axes: file sizes (lines), shuffle modes and trials per cell, per protocol.

Sizes come from ``--longctx-lrt-lines``, else the model profile's ``lrt_lines``, else (source
protocol) the source's sizes or (longctx protocol) candidates up to the window. A size whose file
would not fit the model's window is not generated; :attr:`LrtPlan.note` says which and why.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_longctx import Defaults, Settings
from pytest_longctx.experiments.lrt.options import LrtOptions

#: cl100k tokens of one register line, measured (e.g. "line 1234: REGISTER_CONTENT is <56789>"); the
#: README: 500 lines "roughly 7k tokens", 6,500 "roughly 97k".
TOKENS_PER_LINE = 14
#: Share of the window a file may take (the rest: the answer and tokenizer differences).
FILL = 0.9
CANDIDATE_LINES = (200, 500, 1000, 2000, 5000, 10000)
SHUFFLES = ("none", "full", "block-5", "block-20", "block-100")
#: little_retrieval_test.py ``main()``: n_values and num_tests; the README: "from 500 ... up to 6500",
#: "50 in particular for the figures".
SOURCE_LINES = (500, 1000, 1500, 2000, 2500, 3000, 4000, 5000, 6000, 6500)
SOURCE_TRIALS = 50
#: The README's figures: ordered vs shuffled, and "blocks of size B" (the script's B = 10; the
#: block figure does not state its sizes, so a second, larger block size is ours).
SOURCE_SHUFFLES = ("none", "full", "block-10", "block-100")
#: The register values' range per protocol (``files.SOURCE_VALUES`` and ``files.LONGCTX_VALUES``, which draw them;
#: here without numpy, for the controller's report).
VALUE_RANGES = {"source": (1, 10_000), "longctx": (10_000, 99_999)}


class LrtSizeWarning(UserWarning):
    """LRT sizes left out because their files would not fit the model's window.

    Defined in the package, not in a conftest: xdist's controller rebuilds a worker's warning from its class's
    module and name, and a conftest is no module it can import by name.
    """


@dataclass(frozen=True)
class LrtPlan:
    """What the LRT runs: sizes, shuffle modes, trials per cell (None: --longctx-samples)."""

    lines: list[int]
    shuffles: list[str]
    samples: int | None = None
    skipped: list[int] = field(default_factory=list)
    window: int = 0

    @property
    def note(self) -> str | None:
        """One line naming the sizes left out, or None."""
        if not self.skipped:
            return None
        sizes = ", ".join(f"{n:,}" for n in self.skipped)
        return (f"lrt: {sizes} lines not run: a file of ~{TOKENS_PER_LINE} tokens a line would not fit "
                f"{FILL:.0%} of the {self.window:,}-token window")


def fits(lines: int, window: int) -> bool:
    return lines * TOKENS_PER_LINE <= window * FILL


#: This experiment's defaults for a small model on the CPU (8K window): ordered vs shuffled 20-line files
#: (~460 tokens), 10 trials a cell.
CPU_LINES, CPU_SHUFFLES, CPU_SAMPLES = (20,), ("none", "full"), 10


def lrt_samples(settings: Settings) -> int | None:
    """Trials per cell this experiment defaults to for the run (None: the core's default for the model)."""
    if settings.protocol == "source":
        return SOURCE_TRIALS
    return CPU_SAMPLES if settings.model.profile.runs == "cpu" else None


def lrt_plan(settings: Settings, options: LrtOptions | None = None) -> LrtPlan:
    """The LRT's cells for this run's model, protocol and options (its trials per cell: :func:`lrt_samples`)."""
    window = settings.context_window
    cpu = settings.model.profile.runs == "cpu"
    source = settings.protocol == "source"
    if options is not None and options.lines:
        wanted = list(options.lines)
    elif source:
        wanted = list(SOURCE_LINES)
    elif cpu:
        wanted = list(CPU_LINES)
    else:
        fitting = [n for n in CANDIDATE_LINES if fits(n, window)]
        wanted = fitting[-4:]
    lines = [n for n in wanted if fits(n, window)]
    skipped = [n for n in wanted if not fits(n, window)]
    if source:
        shuffles = list(SOURCE_SHUFFLES)
    else:
        shuffles = list(CPU_SHUFFLES if cpu else SHUFFLES)
    return LrtPlan(lines=lines, shuffles=shuffles, samples=lrt_samples(settings), skipped=skipped, window=window)


def lrt_defaults(options: LrtOptions, settings: Settings) -> list[Defaults]:
    """Trials per cell (the source's 50; 10 on a CPU model) and the sizes and shuffles this run picks."""
    plan = lrt_plan(settings, options)
    return [Defaults("lrt", plan.samples, {"lines": plan.lines, "shuffles": plan.shuffles})]

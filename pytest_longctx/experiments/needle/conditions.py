"""The needle experiment's cells for the run's model: three studies, each its own test.

* ``length`` (NoLiMa): variant (non-literal, literal) x context length x needle depth, the needle present.
* ``distractors`` (Context Rot): 0, 1 or 4 distractors x coherent or shuffled haystack, non-literal, at one length.
* ``abstention``: the needle present or removed from the same context, non-literal, at two lengths.

A remote model: lengths 1K..32K within 90% of its window, depths 0/50/100, 42 trials a length cell (the three
depths of one length ask every one of the 125 pairs about once), 55 a distractor or abstention cell. A model on the
CPU: 300 and 600 tokens at depth 50, two trials a length cell and one a distractor or abstention cell at 300
(16 trials), so the embedded main job stays short.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_longctx import Defaults, Settings
from pytest_longctx.experiments.needle.options import NeedleOptions

REMOTE_LENGTHS = (1000, 2000, 4000, 8000, 16000, 32000)
REMOTE_DEPTHS = (0, 50, 100)
CPU_LENGTHS, CPU_DEPTHS, CPU_SAMPLES, CPU_STUDY_SAMPLES = (300, 600), (50,), 2, 1
REMOTE_SAMPLES, STUDY_SAMPLES = 42, 55
DISTRACTORS = (0, 1, 4)
#: The distractor study's length (the longest length up to it that the run tests), and the abstention lengths.
DISTRACTOR_LENGTH = 8000
ABSTENTION_LENGTHS = (2000, 16000)
FILL = 0.9


class NeedleSizeWarning(UserWarning):
    """Lengths left out because they would not fit the model's window (in the package, not a conftest: xdist's
    controller rebuilds a worker's warning from its class's module and name)."""


@dataclass(frozen=True)
class NeedlePlan:
    """What the needle experiment runs."""

    lengths: tuple[int, ...]
    depths: tuple[int, ...]
    samples: int
    study_samples: int
    distractor_length: int
    abstention_lengths: tuple[int, ...]
    skipped: tuple[int, ...] = ()
    window: int = 0

    @property
    def note(self) -> str | None:
        if not self.skipped:
            return None
        return (f"needle: {', '.join(f'{n:,}' for n in self.skipped)} tokens not run: longer than {FILL:.0%} of the "
                f"{self.window:,}-token window")


def needle_plan(settings: Settings, options: NeedleOptions) -> NeedlePlan:
    window = settings.context_window
    cpu = settings.model.profile.runs == "cpu"
    wanted = options.lengths or (CPU_LENGTHS if cpu else REMOTE_LENGTHS)
    lengths = tuple(n for n in wanted if n <= window * FILL)
    skipped = tuple(n for n in wanted if n > window * FILL)
    if not lengths:
        lengths = (min(wanted),) if min(wanted) <= window * FILL else ()
    depths = options.depths or (CPU_DEPTHS if cpu else REMOTE_DEPTHS)
    short = lengths[0] if lengths else 0
    distractor = max([n for n in lengths if n <= DISTRACTOR_LENGTH] or [short])
    abstention = tuple(sorted({max([n for n in lengths if n <= a] or [short]) for a in ABSTENTION_LENGTHS}))
    if cpu:  # the distractor and abstention studies at the shorter length
        distractor, abstention = short, (short,)
    return NeedlePlan(lengths, tuple(depths), CPU_SAMPLES if cpu else REMOTE_SAMPLES,
                      CPU_STUDY_SAMPLES if cpu else STUDY_SAMPLES, distractor, abstention, skipped, window)


def needle_defaults(options: NeedleOptions, settings: Settings) -> list[Defaults]:
    """A length cell's trials and the lengths, depths and study cells this run picks."""
    plan = needle_plan(settings, options)
    return [Defaults("needle", plan.samples, {"lengths": list(plan.lengths), "depths": list(plan.depths),
                                              "distractor_length": plan.distractor_length,
                                              "abstention_lengths": list(plan.abstention_lengths)},
                     f"a length cell's trials; a distractor or abstention cell asks {plan.study_samples}")]


def item_index(sample: int, block: int, samples: int, count: int) -> int:
    """Which pair (in the run's seeded order) sample ``sample`` of a cell asks: block ``block`` (a depth's index)
    takes the next ``samples`` pairs, so the depths of one length share out the pairs."""
    return (sample + block * samples) % count

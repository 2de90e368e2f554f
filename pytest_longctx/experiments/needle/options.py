"""The needle experiment's options: lengths, depths and the haystack source (resolved by its plugin)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytest_longctx import OptionDef, Settings, UsageError, whole_numbers

LENGTHS = OptionDef("needle-lengths", None, "needle context lengths in tokens, comma-separated, e.g. 1000,4000,16000 "
                    "(default: 1K..32K within the model's window; a CPU model: 300,600)")
DEPTHS = OptionDef("needle-depths", None, "needle depths in percent of the haystack, comma-separated "
                   "(default: 0,50,100; a CPU model: 50)")
HAYSTACK = OptionDef("needle-haystack", "auto", "haystack text: fr (the Federal Register issue, which must be "
                     "present), filler (the shipped fixtures/needle/filler.md) or auto (fr when present, else filler) "
                     "(default: auto)")
OPTIONS = (LENGTHS, DEPTHS, HAYSTACK)
SOURCES = ("auto", "fr", "filler")


@dataclass(frozen=True)
class NeedleOptions:
    lengths: tuple[int, ...] = ()
    depths: tuple[int, ...] = ()
    haystack: str = "auto"

    def to_json(self) -> dict[str, Any]:
        return {"needle_lengths": list(self.lengths), "needle_depths": list(self.depths),
                "needle_haystack": self.haystack}


def resolve(raw: dict[str, Any], settings: Settings) -> NeedleOptions:
    """The options as given, checked; the plan (``conditions.needle_plan``) fits them to the model."""
    depths = whole_numbers(DEPTHS, raw["needle-depths"], 0)
    if any(d > 100 for d in depths):
        raise UsageError(f"--longctx-needle-depths: {raw['needle-depths']!r}: depths are percents from 0 to 100")
    haystack = str(raw["needle-haystack"] or "auto")
    if haystack not in SOURCES:
        raise UsageError(f"--longctx-needle-haystack: {haystack!r}: expected one of {', '.join(SOURCES)}")
    return NeedleOptions(whole_numbers(LENGTHS, raw["needle-lengths"], 200), depths, haystack)

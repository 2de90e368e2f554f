"""The LRT's option: file sizes in lines (``--longctx-lrt-lines``), resolved by the experiment's plugin."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytest_longctx import OptionDef, Settings, whole_numbers

LRT_LINES = OptionDef("lrt-lines", None, "LRT file sizes in lines, comma-separated, e.g. 500,1000,6500 (default: the "
                      "model profile's sizes; the source protocol: the source's 500..6500 that fit the window)")
OPTIONS = (LRT_LINES,)


@dataclass(frozen=True)
class LrtOptions:
    #: --longctx-lrt-lines as given (empty: the LRT's defaults for the model and protocol)
    lines: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"lrt_lines": list(self.lines)}


def resolve(raw: dict[str, Any], settings: Settings) -> LrtOptions:
    """The sizes as given; the plan (``conditions.lrt_plan``) fits them to the model's window."""
    return LrtOptions(lines=whole_numbers(LRT_LINES, raw["lrt-lines"], 2))

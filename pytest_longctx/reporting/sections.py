"""Report sections: which experiments the HTML report shows together, under what title, with which figures.

Experiments contribute sections through the ``pytest_longctx_report_sections`` hook; an experiment that
no section claims gets a section of its own with a plain accuracy-per-cell chart, so a test file with
nothing else wired still gets a readable report.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_longctx.reporting.charts import Figure
from pytest_longctx.reporting.figures import cell_bars

#: Sections without an explicit order come after the ordered ones, alphabetically.
DEFAULT_ORDER = 1000


@dataclass
class Section:
    """One part of the HTML report: a title, the experiments it holds, and its figures (charts first)."""

    name: str
    title: str
    experiments: tuple[str, ...]
    figures: list[Figure | None] = field(default_factory=list)
    #: Position among sections (lower first); built-in experiments use 10, 20, ...
    order: int = DEFAULT_ORDER


def default_section(experiment: str, cells: Sequence[Mapping[str, Any]]) -> Section:
    """The section of an experiment nothing else describes: its cells as bars."""
    return Section(experiment, experiment, (experiment,), [cell_bars(cells, "Accuracy per condition")])


def arrange(contributed: Iterable[Iterable[Section]], cells: Sequence[Mapping[str, Any]]) -> list[Section]:
    """Merge the hook's results: sections with cells, in order, then one per unclaimed experiment."""
    present: list[str] = []
    for cell in cells:
        if str(cell.get("experiment")) not in present:
            present.append(str(cell.get("experiment")))
    claimed: set[str] = set()
    out: list[Section] = []
    for section in (s for group in contributed for s in group or []):
        held = tuple(e for e in section.experiments if e in present and e not in claimed)
        if not held:
            continue
        claimed.update(held)
        out.append(Section(section.name, section.title, held, section.figures, section.order))
    for experiment in present:
        if experiment not in claimed:
            out.append(default_section(experiment, [c for c in cells if c.get("experiment") == experiment]))
    out.sort(key=lambda s: (s.order, s.name))
    for section in out:
        if not [f for f in section.figures if f is not None]:
            mine = [c for c in cells if c.get("experiment") in section.experiments]
            section.figures = [cell_bars(mine, "Accuracy per condition")]
    return out

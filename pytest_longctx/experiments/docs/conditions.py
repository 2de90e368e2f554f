"""The docs experiment's condition axes and trials per cell, for the model and protocol.

Cells are paired: sample i asks the same item in every depth and size cell, so a cell never has
more trials than there are items (more would repeat items with identical contexts). The source
protocol and ``--longctx-samples all`` ask every item (one per document under the source protocol).
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_longctx import Settings
from pytest_longctx.errors import LongctxError
from pytest_longctx.experiments.docs.documents import load_documents
from pytest_longctx.experiments.docs.experiment import read_items
from pytest_longctx.experiments.docs.knobs import with_distractors, with_paraphrase
from pytest_longctx.experiments.docs.options import DocsOptions
from pytest_longctx.experiments.docs.qa_file import QAItem

DEPTHS = (0, 25, 50, 75, 100)  # % of the context's tokens before the answer document (the write-up's)
FRACTIONS = (0, 25, 50, 75, 100)  # % of the budget filled with documents (the write-up's)
ARMS = ("long-context", "rag")


#: This experiment's defaults for a small model on the CPU: the answer document first or last, long context vs
#: RAG at the full budget, 10 trials a cell, 1,024-token contexts, and no LLM judge (a 135M model is no judge).
CPU_DEPTHS, CPU_FRACTIONS, CPU_SAMPLES, CPU_CONTEXT = (0, 100), (100,), 10, 1024


#: A remote model asks every reviewed item of the folder in every cell, up to this many: the pooled alarm's power
#: grows with the items (the shipped folder's 140 see about 5.5 points at intra-item correlation 0.5; a 5-point
#: drop needs about 180, see docs/experiments.md), and the folder's small contexts keep the run cheap.
REMOTE_MOST = 200


@dataclass(frozen=True)
class DocsPlan:
    depths: list[int]
    fractions: list[int]
    arms: list[str]
    #: trials per cell this experiment defaults to (None: the core's default for the model)
    samples: int | None
    #: usable items of the folder (None: not readable yet; the fixture errors later if it stays unusable)
    items: int | None = None
    #: every item in every cell (the source protocol, --longctx-samples all)
    every_item: bool = False
    #: blocks (each item at every depth and at a balanced subset of the sizes, :mod:`.design`) or full
    design: str = "full"
    #: the knob conditions (:mod:`.knobs`) run: not on a CPU model (it sits near zero there, and the main job keeps
    #: its time) nor under the source protocol (the write-up has none)
    knobs: bool = False
    #: usable items with enough distractors, and with a usable paraphrase
    distractor_items: int = 0
    paraphrase_items: int = 0

    def knob_cell(self, resolved: int, eligible: int) -> int:
        """Trials per cell of a knob condition asking ``eligible`` items (every one, or ``resolved`` at most)."""
        if eligible <= 0:
            return 1
        return eligible if self.every_item else min(resolved, eligible)

    def per_cell(self, resolved: int) -> int:
        """Trials per cell: every item, or ``resolved`` (``samples_for``) capped by the items there are."""
        if self.every_item and self.items:
            return self.items
        return min(resolved, self.items) if self.items else resolved

    def per_size_cell(self, resolved: int) -> int:
        """Trials per size cell: :meth:`per_cell`, or under the block design the items each size is given."""
        n = self.per_cell(resolved)
        if self.design != "blocks":
            return n
        from pytest_longctx.experiments.docs.design import size_cell_items

        return size_cell_items(n, len(self.fractions))


def usable(settings: Settings, options: DocsOptions) -> list[QAItem] | None:
    """Usable items of the run's folder under its protocol (None when the folder cannot be read yet)."""
    folder = options.folder_or_default(settings)
    try:
        docs = {d.name: d for d in load_documents(folder)}
        return read_items(folder, docs, options.review, settings.protocol)[1]
    except (LongctxError, OSError):
        return None


def docs_plan(settings: Settings, options: DocsOptions) -> DocsPlan:
    source = settings.protocol == "source"
    cpu = settings.model.profile.runs == "cpu" and not source
    found = usable(settings, options)
    items = None if found is None else len(found)
    remote = settings.model.profile.runs == "remote" and not source
    samples = CPU_SAMPLES if cpu else (min(items, REMOTE_MOST) if remote and items else None)
    return DocsPlan(depths=list(CPU_DEPTHS if cpu else DEPTHS), fractions=list(CPU_FRACTIONS if cpu else FRACTIONS),
                    arms=list(ARMS), samples=samples, items=items,
                    every_item=(source or settings.samples_all) and not settings.samples_given,
                    design=options.design, knobs=not cpu and not source,
                    distractor_items=len(with_distractors(found or [])),
                    paraphrase_items=len(with_paraphrase(found or [], options.review)))

"""The docs experiment's condition axes and trials per cell, for the model profile and protocol.

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
from pytest_longctx.experiments.docs.options import DocsOptions

DEPTHS = (0, 25, 50, 75, 100)  # % of the context's tokens before the answer document (the write-up's)
FRACTIONS = (0, 25, 50, 75, 100)  # % of the budget filled with documents (the write-up's)
ARMS = ("long-context", "rag")


@dataclass(frozen=True)
class DocsPlan:
    depths: list[int]
    fractions: list[int]
    arms: list[str]
    #: trials per cell (None: --longctx-samples; the fixture errors later if the folder is unusable)
    samples: int | None


def item_count(settings: Settings, options: DocsOptions) -> int | None:
    """Usable items of the run's folder under its protocol (None when the folder cannot be read yet)."""
    folder = options.folder_or_default(settings)
    try:
        docs = {d.name: d for d in load_documents(folder)}
        return len(read_items(folder, docs, options.review, settings.protocol)[1])
    except (LongctxError, OSError):
        return None


def docs_plan(settings: Settings, options: DocsOptions) -> DocsPlan:
    profile = settings.model.profile
    source = settings.protocol == "source"
    depths = list(DEPTHS if source or not profile.docs_depths else profile.docs_depths)
    fractions = list(FRACTIONS if source or not profile.docs_fractions else profile.docs_fractions)
    n_items = item_count(settings, options)
    if settings.samples_given:
        wanted = settings.samples
    elif source or settings.samples_all:
        wanted = n_items or settings.samples
    else:
        wanted = profile.docs_samples or settings.samples
    samples = min(wanted, n_items) if n_items else wanted
    return DocsPlan(depths=depths, fractions=fractions, arms=list(ARMS), samples=samples)

"""The docs experiment's pytest plugin (pytest11 entry point ``longctx-docs``): tables, figures, summary lines.

Uses only the plugin's hooks (``pytest_longctx.hookspecs``) and public API, as a user's plugin would.
At module level it imports only pytest, the standard library and its declaration (name, options, defaults).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pytest

from pytest_longctx import Experiment
from pytest_longctx.experiments.docs.options import OPTIONS, DocsOptions, resolve

if TYPE_CHECKING:
    from pytest_longctx import Defaults, Settings
    from pytest_longctx.reporting.sections import Section

EXPERIMENT = "docs"
Rows = list[Mapping[str, Any]]


def record(options: DocsOptions, settings: Settings) -> dict[str, Any]:
    """The options, and the folder's usable items and documents (for the summary's statement of what they detect)."""
    from pytest_longctx.experiments.docs.conditions import docs_plan
    from pytest_longctx.experiments.docs.documents import load_documents

    plan = docs_plan(settings, options)
    try:
        documents: int | None = len(load_documents(options.folder_or_default(settings)))
    except Exception:  # an unreadable folder is the fixture's error to report
        documents = None
    return {**options.to_json(), "docs_folder": {"items": plan.items, "documents": documents}}


def defaults(options: DocsOptions, s: Settings) -> list[Defaults]:
    """Trials per cell (10 on a CPU model; every reviewed item, up to 200, on a remote one; otherwise the core's),
    capped by the reviewed items there are."""
    from pytest_longctx import Defaults
    from pytest_longctx.experiments.docs.conditions import docs_plan

    plan = docs_plan(s, options)
    conditions: dict[str, Any] = {"depths": plan.depths, "context_fractions": plan.fractions, "items": plan.items,
                                  "context": options.context}
    if plan.design == "blocks":
        from pytest_longctx.experiments.docs.design import fractions_per_item

        n = plan.per_cell(int(s.samples) if s.samples_given else (plan.samples or s.model.profile.default_samples))
        k = fractions_per_item(n, len(plan.fractions))  # of the items this run asks (--longctx-samples)
        conditions.update(design="blocks", fractions_per_item=k)
        why = (f"every item at every depth and at {k} of the {len(plan.fractions)} context sizes in both arms: "
               "nearly the full design's power for fewer requests (a folder's items are all there is)")
        return [Defaults(EXPERIMENT, plan.samples, conditions, why)]
    return [Defaults(EXPERIMENT, plan.samples, conditions)]


#: The experiment declared once: its options (--longctx-docs*), its record settings and defaults.
DOCS = Experiment(EXPERIMENT, OPTIONS, resolve, record=record, defaults=defaults)
docs_options = DOCS.options
pytest_addhooks = DOCS.register  # the declaration's hooks (it is a plugin object) and the hook specifications


def pytest_configure(config: pytest.Config) -> None:
    """An unknown retriever name is a usage error now (one line), not a fixture error later."""
    from pytest_longctx import active

    if active(config):
        retriever(config, docs_options(config).retriever)


def retriever(config: pytest.Config, name: str) -> Any:
    """The RAG arm's retriever: a built-in one, or what a ``pytest_longctx_retriever`` hook returns for ``name``."""
    from pytest_longctx.experiments.docs.retrievers import BUILT_IN, make_retriever

    hooked = None if name in BUILT_IN else config.hook.pytest_longctx_retriever(config=config, name=name)
    if name not in BUILT_IN and hooked is None:
        raise pytest.UsageError(f"--longctx-docs-retriever: no retriever {name!r}; use bm25, dense or hybrid, or "
                                "return one for this name from a pytest_longctx_retriever hook in your conftest.py")
    return make_retriever(name, hooked)


def pytest_longctx_evidence() -> list[Any]:
    """Sample i asks one reviewed QA item in every depth, size and arm cell: the item is the unit of evidence."""
    from pytest_longctx import Evidence, LengthAxis

    return [Evidence("docs", "item", "QA item",
                     "sample i asks the same reviewed QA item in every depth, size and arm cell (under "
                     "--longctx-docs-design blocks: every depth, some sizes), and it shares its fate there",
                     LengthAxis("context_fraction", tokens="context_tokens", where={"arm": "long-context"}))]


@DOCS.own
def pytest_longctx_tables(cells: Rows, trials: Rows) -> list[dict[str, Any]]:
    """Accuracy by answer depth and context size, long context vs retrieval, in the write-up's layout."""
    from pytest_longctx.experiments.docs.knobs_report import knob_tables
    from pytest_longctx.experiments.docs.report import docs_tables

    return docs_tables(cells, trials) + knob_tables(cells, trials)


@DOCS.own
def pytest_longctx_report_sections(cells: Rows, trials: Rows) -> list[Section]:
    from pytest_longctx.experiments.docs.report import docs_figures
    from pytest_longctx.reporting.sections import Section

    return [Section(EXPERIMENT, "Your documents (docs)", (EXPERIMENT,), docs_figures(cells, trials), order=40)]


def pytest_longctx_summary_lines(record: Mapping[str, Any]) -> list[str]:
    """Every scorer's accuracy, the judge's agreement, and RAG recall (docs trials only)."""
    from pytest_longctx.experiments.docs.knobs_report import knob_lines
    from pytest_longctx.experiments.docs.summary import docs_summary, folder_lines

    return docs_summary(record.get("trials") or []) + knob_lines(record) + folder_lines(record)


def pytest_longctx_graders() -> list[str]:
    """The local test server's grader of this experiment's prompts."""
    return ["pytest_longctx.experiments.docs.grader:make_grader"]

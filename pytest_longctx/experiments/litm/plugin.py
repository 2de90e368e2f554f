"""The experiment's pytest plugin (pytest11 entry point ``longctx-litm``): options, data fixtures, report parts.

Uses only the plugin's hooks (``pytest_longctx.hookspecs``) and public API, as a user's plugin would.
At module level it imports only pytest, the standard library and its declaration (name, options, defaults).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_longctx import Experiment
from pytest_longctx.experiments.litm.options import OPTIONS, resolve
from pytest_longctx.experiments.litm.plan import EXPERIMENTS, litm_defaults

if TYPE_CHECKING:
    from pytest_longctx.experiments.litm.contexts import Bm25
    from pytest_longctx.experiments.litm.data import KvRow
    from pytest_longctx.experiments.litm.design import LitmDesign
    from pytest_longctx.reporting.sections import Section

Rows = list[Mapping[str, Any]]
#: The experiment declared once: its options (--longctx-litm-*), its record settings and defaults.
LITM = Experiment("litm", OPTIONS, resolve, defaults=litm_defaults, experiments=EXPERIMENTS)
litm_options = LITM.options
pytest_addhooks = LITM.register  # the declaration's hooks (it is a plugin object) and the hook specifications


def run_settings(config: pytest.Config) -> Any:
    """The core's resolved settings (data dir, cache dir, context window)."""
    from pytest_longctx import settings

    return settings(config)


def pytest_longctx_evidence() -> list[Any]:
    """Trial i asks one question (one key-value row) in every cell: the question (row) is the unit of evidence."""
    from pytest_longctx import Evidence, LengthAxis

    return [Evidence("litm-qa", "item", "question",
                     "a question is asked at every gold position of every number of documents (or, under "
                     "--longctx-litm-design blocks, of one) and in the baselines, and shares its fate there",
                     LengthAxis("documents", tokens="context_tokens", exclude={"documents": "[01]"})),
            Evidence("litm-kv", "item", "row", "trial i looks up the same row's key at every key position",
                     LengthAxis("keys", tokens="context_tokens"))]


@LITM.own
def pytest_longctx_tables(cells: Rows, trials: Rows) -> list[dict[str, Any]]:
    """The paper's accuracy-by-position tables (QA per number of documents, KV per number of keys)."""
    from pytest_longctx.experiments.litm.report import litm_tables

    return litm_tables(cells, trials)


@LITM.own
def pytest_longctx_report_sections(cells: Rows, trials: Rows) -> list[Section]:
    """One section with the paper's figures: accuracy vs position of the relevant information (the U curve)."""
    from pytest_longctx import Section
    from pytest_longctx.experiments.litm.figure import litm_figures

    return [Section("litm", "Lost in the middle (litm-qa, litm-kv)", EXPERIMENTS, list(litm_figures(cells)),
                    order=50)]


def data_path(config: pytest.Config, name: str) -> Path:
    """A data file through the plugin's corpus lookup (never a download); CorpusNotFound when it is not here."""
    from pytest_longctx.experiments.litm.data import locate

    settings = run_settings(config)
    return locate(name, data_dir=settings.data_dir, cache_dir=Path(settings.cache_dir), download=False)


def require_data(config: pytest.Config, experiment: str, names: Sequence[str]) -> None:
    """At collection: the data files ``names`` are here, else ``experiment`` is skipped with one line saying how
    to get them (``DataMissing``)."""
    from pytest_longctx import CorpusNotFound, data_missing
    from pytest_longctx.experiments.litm.data import corpus_file

    missing = []
    looked: tuple[str, ...] = ()  # where the lookup looked (the same places for every file)
    for name in names:
        try:
            data_path(config, name)
        except CorpusNotFound as exc:
            missing.append(corpus_file(name))
            looked = exc.looked
    if missing:
        raise data_missing((experiment,), missing, "litm", looked)


@pytest.fixture(scope="session")
def litm_qa_pool(pytestconfig: pytest.Config) -> Bm25:
    """The NQ-Open oracle questions and the BM25 index over their gold passages (one per worker)."""
    from pytest_longctx.experiments.litm.contexts import Bm25
    from pytest_longctx.experiments.litm.data import load_questions

    return Bm25(load_questions(data_path(pytestconfig, "qa")))


@pytest.fixture(scope="session")
def litm_qa_design(pytestconfig: pytest.Config, litm_qa_pool: Bm25) -> LitmDesign | None:
    """Which question each QA cell's samples ask (``--longctx-litm-design blocks``), else None: trial i asks the
    same question in every cell."""
    options = litm_options(pytestconfig)
    if options.design != "blocks":
        return None
    from pytest_longctx import samples_for
    from pytest_longctx.experiments.litm.data import sample_order
    from pytest_longctx.experiments.litm.design import block_design
    from pytest_longctx.experiments.litm.plan import qa_cells

    s = run_settings(pytestconfig)
    counts = sorted({n for n, _ in qa_cells(options, s.context_window)})
    order = sample_order(len(litm_qa_pool.questions), s.seed, "qa")
    return block_design(order, counts, samples_for(pytestconfig, "litm-qa"), baselines=options.baselines)


@pytest.fixture(scope="session")
def litm_kv_rows(pytestconfig: pytest.Config) -> dict[int, list[KvRow]]:
    """The key-value rows per key count the run uses (read once per worker)."""
    from pytest_longctx.experiments.litm.data import load_kv
    from pytest_longctx.experiments.litm.plan import kv_cells

    counts = sorted({n for n, _ in kv_cells(litm_options(pytestconfig), run_settings(pytestconfig).context_window)})
    return {n: load_kv(data_path(pytestconfig, f"kv-{n}")) for n in counts}


def pytest_longctx_graders() -> list[str]:
    """The local test server's grader of this experiment's prompts."""
    return ["pytest_longctx.experiments.litm.grader:make_grader"]

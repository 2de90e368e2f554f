"""The experiment's pytest plugin (pytest11 entry point ``longctx-litm``): its options and its data fixtures.

Imports only pytest and the standard library at module level, like the core plugin.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_longctx.experiments.litm.contexts import Bm25
    from pytest_longctx.experiments.litm.data import KvRow
    from pytest_longctx.experiments.litm.plan import LitmOptions

#: (option noun, help) of the experiment's options; CLI ``--longctx-<noun>``, ini ``longctx_<noun>``.
OPTIONS = (
    ("litm-documents", "Lost in the middle: numbers of documents, e.g. 10,20,30 "
                       "(default: 10 for windows under 16K tokens, else 10,20,30)"),
    ("litm-keys", "Lost in the middle: numbers of key-value pairs, 75 and/or 140 "
                  "(default: 75 for windows under 16K tokens, else 75,140)"),
    ("litm-positions", "Lost in the middle: positions of the relevant document/key: paper, all, or 0-based "
                       "indices like 0,4,9 (default: paper)"),
    ("litm-baselines", "Lost in the middle: also run closed-book and oracle QA cells (default: true)"),
)
OPTIONS_KEY = pytest.StashKey["LitmOptions"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("longctx", "pytest-longctx: long-context LLM evaluation")
    for noun, text in OPTIONS:
        dest = "longctx_" + noun.replace("-", "_")
        group.addoption(f"--longctx-{noun}", dest=dest, default=None, metavar=noun.upper().replace("-", "_"),
                        help=text)
        parser.addini(dest, help=text, default=None)


def _raw(config: pytest.Config, noun: str) -> str | None:
    dest = "longctx_" + noun.replace("-", "_")
    cli = config.getoption(dest, None)
    if cli is not None:
        return str(cli)
    ini = config.getini(dest)
    return str(ini) if ini not in (None, "") else None


def pytest_configure(config: pytest.Config) -> None:
    """Resolve CLI > ini > default once; a bad value is a usage error (one line)."""
    from pytest_longctx.errors import UsageError
    from pytest_longctx.experiments.litm.plan import parse_options

    try:
        config.stash[OPTIONS_KEY] = parse_options(*(_raw(config, noun) for noun, _ in OPTIONS))
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None


def litm_options(config: pytest.Config) -> LitmOptions:
    """The run's resolved options."""
    return config.stash[OPTIONS_KEY]


def run_settings(config: pytest.Config) -> Any:
    """The core's resolved settings (no public accessor yet: see /work/notes/litm-needs.md)."""
    from pytest_longctx.session.keys import SETTINGS_KEY

    return config.stash[SETTINGS_KEY]


def data_path(config: pytest.Config, name: str) -> Path:
    """A data file through the plugin's corpus lookup; CorpusNotFound (a UsageError) when it cannot be had."""
    from pytest_longctx.experiments.litm.data import locate

    settings = run_settings(config)
    return locate(name, data_dir=settings.data_dir, cache_dir=Path(settings.cache_dir))


@pytest.fixture(scope="session")
def litm_qa_pool(pytestconfig: pytest.Config) -> Bm25:
    """The NQ-Open oracle questions and the BM25 index over their gold passages (one per worker)."""
    from pytest_longctx.experiments.litm.contexts import Bm25
    from pytest_longctx.experiments.litm.data import load_questions

    return Bm25(load_questions(data_path(pytestconfig, "qa")))


@pytest.fixture(scope="session")
def litm_kv_rows(pytestconfig: pytest.Config) -> dict[int, list[KvRow]]:
    """The key-value rows per key count the run uses (read once per worker)."""
    from pytest_longctx.experiments.litm.data import load_kv
    from pytest_longctx.experiments.litm.plan import kv_cells

    counts = sorted({n for n, _ in kv_cells(litm_options(pytestconfig), run_settings(pytestconfig).context_window)})
    return {n: load_kv(data_path(pytestconfig, f"kv-{n}")) for n in counts}

"""Cells of "Lost in the Middle": documents x gold position, keys x key position, for the model's window and
the --longctx-litm-* options (pytest_longctx/experiments/litm/plan.py)."""

from __future__ import annotations

import pytest

from pytest_longctx.experiments.litm.plan import kv_cells, qa_cells
from pytest_longctx.experiments.litm.plugin import litm_options, require_data, run_settings


def _qa_id(cell: tuple[int, int | None]) -> str:
    documents, position = cell
    return {0: "closedbook", 1: "oracle"}.get(documents, f"{documents}docs-at{position}")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    config = metafunc.config
    window = run_settings(config).context_window
    if "gold_position" in metafunc.fixturenames:
        require_data(config, "litm-qa", ["qa"])  # else this module is skipped, with one line saying how to get it
        cells = qa_cells(litm_options(config), window)
        metafunc.parametrize(("documents", "gold_position"), cells, ids=[_qa_id(c) for c in cells])
    if "key_position" in metafunc.fixturenames:
        cells = kv_cells(litm_options(config), window)
        require_data(config, "litm-kv", [f"kv-{keys}" for keys in sorted({n for n, _ in cells})])
        metafunc.parametrize(("keys", "key_position"), cells, ids=[f"{n}keys-at{p}" for n, p in cells])

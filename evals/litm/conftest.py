"""Cells of "Lost in the Middle": documents x gold position, keys x key position, for the model's window and
the --longctx-litm-* options (pytest_longctx/experiments/litm/plan.py)."""

from __future__ import annotations

import pytest

from pytest_longctx.experiments.litm.plan import kv_cells, qa_cells
from pytest_longctx.experiments.litm.plugin import data_path, litm_options, run_settings


def _qa_id(cell: tuple[int, int | None]) -> str:
    documents, position = cell
    return {0: "closedbook", 1: "oracle"}.get(documents, f"{documents}docs-at{position}")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    config = metafunc.config
    window = run_settings(config).context_window
    if "gold_position" in metafunc.fixturenames:
        data_path(config, "qa")  # a missing corpus is a usage error at collection (one line, exit 4)
        cells = qa_cells(litm_options(config), window)
        metafunc.parametrize(("documents", "gold_position"), cells, ids=[_qa_id(c) for c in cells])
    if "key_position" in metafunc.fixturenames:
        cells = kv_cells(litm_options(config), window)
        for keys in sorted({n for n, _ in cells}):
            data_path(config, f"kv-{keys}")
        metafunc.parametrize(("keys", "key_position"), cells, ids=[f"{n}keys-at{p}" for n, p in cells])

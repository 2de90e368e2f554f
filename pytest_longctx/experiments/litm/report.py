"""Tables in the paper's layout, from the run record's cells (plain dicts), in the shape of the other experiments'.

Rows are the number of documents (keys), columns the 1-based position of the relevant one, as in the paper's
figures; the closed-book and oracle QA baselines are a table of their own. A cell is
``{"correct": k, "n": n}`` (scored trials; errors are named in the note, never counted as wrong).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_longctx.experiments.litm import KV_EXPERIMENT, QA_EXPERIMENT
from pytest_longctx.experiments.litm.contexts import DISTRACTORS_NOTE

Cells = Sequence[Mapping[str, Any]]
Trials = Sequence[Mapping[str, Any]]
#: experiment -> (count parameter, position parameter, what is counted)
AXES = {QA_EXPERIMENT: ("documents", "gold_position", "documents"), KV_EXPERIMENT: ("keys", "key_position", "keys")}


def curves(cells: Cells, experiment: str) -> dict[int, dict[int, dict[str, Any]]]:
    """count -> 0-based position -> ``{"correct", "n", "errors", "ci_low", "ci_high"}`` (counts >= 2 only)."""
    count_key, position_key, _ = AXES[experiment]
    out: dict[int, dict[int, dict[str, Any]]] = {}
    for cell in cells:
        params = cell.get("params") or {}
        if cell.get("experiment") != experiment or params.get(position_key) is None:
            continue
        count = int(params.get(count_key, 0))
        if count < 2:
            continue
        out.setdefault(count, {})[int(params[position_key])] = _point(cell)
    return {n: dict(sorted(points.items())) for n, points in sorted(out.items())}


def baselines(cells: Cells) -> dict[str, dict[str, Any]]:
    """``closed-book`` (0 documents) and ``oracle`` (the gold passage alone) QA cells, when the run has them."""
    names = {0: "closed-book", 1: "oracle"}
    out: dict[str, dict[str, Any]] = {}
    for cell in cells:
        params = cell.get("params") or {}
        if cell.get("experiment") == QA_EXPERIMENT and params.get("documents") in names:
            out[names[int(params["documents"])]] = _point(cell)
    return out


def _point(cell: Mapping[str, Any]) -> dict[str, Any]:
    return {"correct": int(cell.get("correct", 0)), "n": int(cell.get("n", 0)), "errors": int(cell.get("errors", 0)),
            "ci_low": cell.get("ci_low"), "ci_high": cell.get("ci_high")}


def _errors_note(points: Sequence[Mapping[str, Any]]) -> str:
    errors = sum(int(p.get("errors", 0)) for p in points)
    return f" {errors} trial error(s) are not counted (see the trials)." if errors else ""


def _position_table(cells: Cells, experiment: str, title: str, note: str) -> dict[str, Any] | None:
    _, _, noun = AXES[experiment]
    grid = curves(cells, experiment)
    if not grid:
        return None
    positions = sorted({p for points in grid.values() for p in points})
    rows = [[f"{n} {noun}", *({"correct": pts[p]["correct"], "n": pts[p]["n"]} if p in pts else None
                              for p in positions)] for n, pts in grid.items()]
    every = [pt for pts in grid.values() for pt in pts.values()]
    return {"experiment": experiment, "title": title, "columns": [noun, *(str(p + 1) for p in positions)],
            "rows": rows, "note": note + _errors_note(every)}


def litm_tables(cells: Cells, trials: Trials = ()) -> list[dict[str, Any]]:
    """The QA, baseline and key-value tables present in ``cells`` (builder signature of reporting/tables.py)."""
    tables = []
    qa = _position_table(cells, QA_EXPERIMENT, "Lost in the middle: multi-document QA accuracy by position of the "
                         "document with the answer (1-based)",
                         f"best_subspan_em over NQ-Open; distractors: {DISTRACTORS_NOTE}.")
    if qa:
        tables.append(qa)
    base = baselines(cells)
    if base:
        tables.append({"experiment": QA_EXPERIMENT, "title": "Lost in the middle: QA baselines",
                       "columns": ["setting", "accuracy"],
                       "rows": [[name, {"correct": p["correct"], "n": p["n"]}] for name, p in base.items()],
                       "note": "closed-book: the question alone; oracle: the gold passage alone."
                               + _errors_note(list(base.values()))})
    kv = _position_table(cells, KV_EXPERIMENT, "Lost in the middle: key-value retrieval accuracy by position of "
                         "the key (1-based)", "the value string in the response; the paper's 300-key file is not "
                         "available.")
    if kv:
        tables.append(kv)
    return tables

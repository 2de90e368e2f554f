"""Right-section baseline results per model, kept across runs, used to filter long-context cells.

The ``qa-baseline`` experiment asks each question with only its own section. Its per-question
outcomes are merged into ``<cache-dir>/baseline/<provider>__<model>.json`` (``..__source.json`` under the
source protocol, whose baseline prompt differs) at the end of a run; later runs exclude questions this
model missed there from the ``qa`` cells.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_longctx.util.fsutil import atomic_write_text

EXPERIMENT = "qa-baseline"


def baseline_path(cache_dir: Path, model_spec: str, protocol: str = "longctx") -> Path:
    suffix = "" if protocol == "longctx" else f"__{protocol}"
    return cache_dir / "baseline" / (model_spec.replace("/", "__").replace(":", "_") + suffix + ".json")


def load(cache_dir: Path, model_spec: str, protocol: str = "longctx") -> dict[str, bool]:
    """Question id → answered correctly with the right section (empty when never run)."""
    path = baseline_path(cache_dir, model_spec, protocol)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except ValueError:
        return {}
    return {str(k): bool(v) for k, v in data.get("questions", {}).items()}


def update_from_record(record: dict[str, Any], cache_dir: Path) -> Path | None:
    """Merge this run's qa-baseline outcomes (errors excluded) into the model's file."""
    found = {t["item"]: t["outcome"] == "correct" for t in record["trials"]
             if t["experiment"] == EXPERIMENT and t["outcome"] != "error" and t.get("item")}
    if not found:
        return None
    model = record["settings"]["model"]
    protocol = str(record["settings"].get("protocol", "longctx"))
    merged = {**load(cache_dir, model, protocol), **found}
    path = baseline_path(cache_dir, model, protocol)
    atomic_write_text(path, json.dumps({"model": model, "questions": dict(sorted(merged.items()))}, indent=1))
    return path

"""One lrt run of the real plugin against the local Messages-API server, for the sequential gate's tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: 4 sizes x 5 shuffles x 20 samples: 400 trials in 20 sample groups
LRT = ("--longctx-lrt-lines", "100,200,300,400")
#: The recipe's alarm on lrt: any drop from the compared run fails.
ALARM = ("--longctx-threshold", "experiment=lrt:max-drop=0")


def run_lrt(pytester: pytest.Pytester, model: str, name: str, *args: str, dist: tuple[str, ...] = ("-n", "2"),
            cache: str | None = None) -> tuple[int, dict[str, Any], str]:
    """Exit code, run record and output of ``evals/lrt`` for ``anthropic/MODEL`` (report in NAME, cache in
    ``cache`` or cache-NAME); a stopped run (exit 2) is read from the partial record it writes beside the last
    complete one, never over it."""
    report = pytester.path / name
    result = pytester.runpytest_subprocess(
        str(ROOT / "evals" / "lrt"), "-p", "no:cacheprovider", *dist, "--longctx-model", f"anthropic/{model}",
        "--longctx-report-dir", str(report), "--longctx-cache-dir", str(pytester.path / (cache or f"cache-{name}")),
        "--longctx-max-concurrency", "4", *LRT, *args, timeout=600)
    out = result.stdout.str() + result.stderr.str()
    path = report / ("longctx.partial.json" if result.ret == pytest.ExitCode.INTERRUPTED else "longctx.json")
    assert path.is_file(), out
    assert "INTERNALERROR" not in out
    return int(result.ret), json.loads(path.read_text(encoding="utf-8")), out


def compared_with_production(pytester: pytest.Pytester) -> tuple[str, ...]:
    """Run production (``claude-prod``, the whole design, no cache) into ``prod/`` and return the arguments that
    compare a candidate with it under the recipe's alarm."""
    code, prod, out = run_lrt(pytester, "claude-prod", "prod", "--longctx-cache", "off")
    assert code == 0 and len(prod["trials"]) == 400, out
    return ("--longctx-compare", str(pytester.path / "prod" / "longctx.json"), *ALARM)

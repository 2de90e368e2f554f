"""End to end: `pytest evals/docs` with fake models, read back from the run record."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "docs"
CELLS = 15  # 5 depths + 5 sizes x 2 arms


def run_docs(tmp_path: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    report = tmp_path / "report"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "evals/docs/test_docs.py", "-q", "--longctx-report-dir", str(report),
         "--longctx-cache", "off", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)
    path = report / "longctx.json"
    record = json.loads(path.read_text()) if path.exists() else {}
    return proc.returncode, record, proc.stdout + proc.stderr


@pytest.mark.e2e
def test_fake_perfect_is_right_everywhere_with_every_scorer(tmp_path: Path) -> None:
    rc, record, out = run_docs(tmp_path, "--longctx-model", "fake/perfect", "--longctx-samples", "4")
    assert rc == 0, out
    cells = record["cells"]
    assert len(cells) == CELLS and all(c["accuracy"] == 1.0 and c["n"] == 4 and c["errors"] == 0 for c in cells)
    params = sorted(json.dumps(c["params"], sort_keys=True) for c in cells)
    assert params.count('{"arm": "rag", "context_fraction": 50}') == 1 and '{"depth": 75}' in params
    for t in record["trials"]:
        d = t["detail"]
        assert (d["em"], d["f1"], d["subspan"], d["judge"], d["judge_agree"]) == (True, 1.0, True, True, True)
        assert d["tokenizer"] == "tiktoken/cl100k_base" and t["calls"] == 2
        assert t["item"] and t["answer"] == t["expected"]
        if t["params"].get("arm") == "rag":
            assert d["retrieval_recall"] in (0, 1) and 1 <= len(d["retrieved"]) <= 4
    assert set(record["fixtures"]) == {"docs:fixtures/docs", "docs-qa:fixtures/docs/longctx-qa.jsonl"}
    assert record["settings"]["docs_review"] == "required" and record["settings"]["docs_scorer"] == "subspan"
    assert "longctx docs rag retrieval recall by context_fraction: 0%:" in out


@pytest.mark.e2e
def test_fake_random_is_at_chance(tmp_path: Path) -> None:
    rc, record, out = run_docs(tmp_path, "--longctx-model", "fake/random", "--longctx-samples", "10")
    assert rc == 0, out
    trials = record["trials"]
    assert len(trials) == 10 * CELLS and not any(t["outcome"] == "error" for t in trials)
    accuracy = sum(t["outcome"] == "correct" for t in trials) / len(trials)
    assert 0.13 <= accuracy <= 0.37  # chance is 1/4 (gold + 3 other documents' answers), n=150
    assert all(t["detail"]["subspan"] == (t["outcome"] == "correct") for t in trials)
    judged = [t["detail"]["judge_agree"] for t in trials]
    assert 0.3 <= sum(judged) / len(judged) <= 0.7  # a random judge agrees half the time


@pytest.mark.e2e
def test_xdist_gives_the_same_trials(tmp_path: Path) -> None:
    def trials(*extra: str) -> list[tuple[Any, ...]]:
        rc, record, out = run_docs(tmp_path / "-".join(extra or ("serial",)), "--longctx-model", "fake/random",
                                   "--longctx-samples", "1", *extra)
        assert rc == 0, out
        return [(t["nodeid"], t["outcome"], t["item"], t["answer"], json.dumps(t["detail"], sort_keys=True))
                for t in record["trials"]]

    assert trials() == trials("-n", "2")


def review_folder(tmp_path: Path) -> Path:
    """Three documents; two approved items, one pending, one rejected, one stale (its document changed)."""
    folder = tmp_path / "docs"
    folder.mkdir()
    names = ["tollerton-mill-history.md", "skerrow-rock-log.txt", "harbor-lane-sourdough.md"]
    for name in names:
        shutil.copy(FIXTURES / name, folder / name)
    keep = {"tollerton-mill-history/1": "approved", "skerrow-rock-log/1": "approved", "skerrow-rock-log/2": "pending",
            "tollerton-mill-history/2": "rejected", "harbor-lane-sourdough/1": "approved"}
    lines = []
    for raw in (FIXTURES / "longctx-qa.jsonl").read_text().splitlines():
        obj = json.loads(raw)
        if obj["id"] in keep:
            obj["status"] = keep[obj["id"]]
            lines.append(json.dumps(obj))
    (folder / "longctx-qa.jsonl").write_text("\n".join(lines) + "\n")
    bakery = folder / "harbor-lane-sourdough.md"
    bakery.write_text(bakery.read_text().replace("Old Maud", "Old Mabel"))  # approved item now stale
    return folder


@pytest.mark.e2e
def test_only_approved_items_are_used_when_review_is_required(tmp_path: Path) -> None:
    folder = review_folder(tmp_path)
    rc, record, out = run_docs(tmp_path / "required", "--longctx-model", "fake/perfect", "--longctx-samples", "4",
                               "--longctx-docs", str(folder))
    assert rc == 0, out
    assert {t["item"] for t in record["trials"]} == {"tollerton-mill-history/1", "skerrow-rock-log/1"}
    assert "1 stale QA item(s) left out (document changed or gone)" in out
    rc, record, out = run_docs(tmp_path / "optional", "--longctx-model", "fake/perfect", "--longctx-samples", "4",
                               "--longctx-docs", str(folder), "--longctx-docs-review", "optional")
    assert rc == 0, out
    assert {t["item"] for t in record["trials"]} == {"tollerton-mill-history/1", "skerrow-rock-log/1",
                                                     "skerrow-rock-log/2"}


@pytest.mark.e2e
def test_a_folder_without_approved_items_stops_with_one_line(tmp_path: Path) -> None:
    folder = review_folder(tmp_path)
    qa = folder / "longctx-qa.jsonl"
    qa.write_text(qa.read_text().replace('"approved"', '"pending"'))
    rc, record, out = run_docs(tmp_path, "--longctx-model", "fake/perfect", "--longctx-samples", "2",
                               "--longctx-docs", str(folder))
    assert rc == 4, out  # a usage error found by a fixture stops the run with pytest's usage-error code
    assert record == {}  # bad input is not a result: no run record
    assert out.count("no approved QA items (3 pending, 1 rejected, 1 stale)") == 1, out
    assert f"ERROR: {qa}: no approved QA items" in out
    assert "Traceback" not in out


@pytest.mark.e2e
@pytest.mark.parametrize("args, message", [
    (["--longctx-docs-review", "maybe"], "--longctx-docs-review: expected required or optional, got 'maybe'"),
    (["--longctx-docs-scorer", "bleu"], "--longctx-docs-scorer: expected subspan, em, f1 or judge, got 'bleu'"),
    (["--longctx-docs-scorer", "judge", "--longctx-docs-judge", "false"], "judge needs --longctx-docs-judge true"),
    (["--longctx-docs-context", "many"], "--longctx-docs-context: expected a whole number"),
])
def test_bad_docs_options_are_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    rc, _, out = run_docs(tmp_path, "--longctx-model", "fake/perfect", *args)
    assert rc == 4 and message in out

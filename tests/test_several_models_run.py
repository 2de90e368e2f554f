"""Several models in one session, end to end: ``pytest evals/lrt -n 2`` with three ``--longctx-model`` against the
local Messages-API server's graded responder (models of known accuracy), gated with the CI recipe's LRT alarm.

The three models share the difficulty seed and never flip, so they answer like versions of one model: the items a
0.70 model gets right are a subset of a 0.85 model's, which are a subset of a 0.95 model's. Their paired
differences therefore have a known sign and known discordance (a worse model never gets an item right that a
better one misses), the ranking must put them in order, and the gate must fail only the regressed one.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.server.graded import Graded, prompt_text

ROOT = Path(__file__).resolve().parent.parent
ACCURACY = {"claude-better": 0.95, "claude-ref": 0.85, "claude-worse": 0.70}
LRT = ("--longctx-lrt-lines", "100,200")
#: Each model at its own price (USD per million tokens in / out): each is charged at the price of the model called.
PRICES = {"claude-better": (5, 25), "claude-ref": (3, 15), "claude-worse": (1, 5)}


def near(share: float, n: int, p: float) -> bool:
    """``share`` of ``n`` trials within 4 binomial standard deviations of ``p``."""
    return abs(share - p) <= 4 * math.sqrt(p * (1 - p) / n)


def run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, Path]:
    report = pytester.path / "report"
    result = pytester.runpytest_subprocess(
        str(ROOT / "evals" / "lrt"), "-p", "no:cacheprovider", "-n", "2", "--longctx-report-dir", str(report),
        "--longctx-cache", "off", "--longctx-cache-dir", str(pytester.path / "cache"), *LRT, *args, timeout=600)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    return result, report


def read(path: Path) -> dict[str, Any]:
    assert path.is_file(), path
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


@pytest.mark.e2e
def test_three_models_one_session_pair_rank_and_gate_the_regressed_one(pytester: pytest.Pytester, api: Any) -> None:
    graded = Graded(",".join(f"{m}={a}" for m, a in ACCURACY.items()) + ",flip=0,seed=7")
    srv = api(graded)
    models = [f"anthropic/{m}" for m in ACCURACY]
    result, report = run(pytester, *(a for m in models for a in ("--longctx-model", m)),
                         "--longctx-reference", "claude-ref", "--longctx-threshold", "experiment=lrt:max-drop=0",
                         "--longctx-prices", ",".join(f"anthropic/{m}={p[0]}/{p[1]}" for m, p in PRICES.items()))
    out = result.stdout.str()
    assert result.ret == 10, out  # the gate failed (only claude-worse, below)

    run_record = read(report / "longctx.json")  # one report: the reference's record with every model's summary
    assert (report / "longctx.html").is_file()
    assert run_record["settings"]["model"] == "anthropic/claude-ref"
    assert run_record["settings"]["models"] == models
    records = {m: read(report / "models" / m.replace("/", "-") / "longctx.json") for m in models}
    for spec, record in records.items():
        assert record["settings"]["model"] == spec and record["settings"]["reference"] == "anthropic/claude-ref"
        assert len(record["trials"]) == 200 and {t["model"] for t in record["trials"]} == {spec}
        assert not [t for t in record["trials"] if t["outcome"] == "error"]

    # every trial is what the rule decided for its model's request (the server keeps every body)
    decided = {}
    for body in srv.stats.requests:
        text = prompt_text(body)
        line = re.search(r"Go to line (\d+) ", text).group(1)
        value = re.search(rf"^line {line}: REGISTER_CONTENT is <(\d+)>$", text, re.M).group(1)
        decided[body["model"], int(line), int(value)] = graded.verdict(body).right
    assert len(decided) == 600
    for spec, record in records.items():
        name = spec.split("/", 1)[1]
        for trial in record["trials"]:
            assert (trial["outcome"] == "correct") == decided[name, trial["detail"]["target_line"], trial["expected"]]
        share = sum(t["outcome"] == "correct" for t in record["trials"]) / 200
        assert near(share, 200, ACCURACY[name]), (spec, share)

    # the same items and prompts for each model: one test id per condition x model, paired item by item
    items = [sorted((json.dumps(t["params"], sort_keys=True), t["sample"], t["item"], t["expected"])
                    for t in r["trials"]) for r in records.values()]
    assert items[0] == items[1] == items[2]
    ids = Counter(re.sub(r"-anthropic-claude-[a-z]+-", "-", t["nodeid"]) for r in records.values()
                  for t in r["trials"])
    assert set(ids.values()) == {3} and len(ids) == 200

    side = run_record["models"]["experiments"]["lrt"]
    rows = side["models"]
    for spec in models:
        assert rows[spec]["pooled"]["n"] == 200 and rows[spec]["pooled"]["clusters"] == 200
        assert rows[spec]["effective_length"]["param"] and rows[spec]["effective_length"]["low"] >= 0
        assert len(rows[spec]["series"]) == 10  # a line per model: every cell's accuracy
        assert records[spec]["settings"]["alpha"] == pytest.approx(0.05 / 2)  # two models gated: Bonferroni
    better, worse = rows["anthropic/claude-better"]["vs_reference"], rows["anthropic/claude-worse"]["vs_reference"]
    assert better["regressed"] == 0 and better["improved"] > 0 and better["low"] > 0  # nested: only gains
    assert worse["improved"] == 0 and worse["regressed"] > 0 and worse["high"] < 0  # nested: only losses
    assert better["pairs"] == worse["pairs"] == 200
    ranking = side["ranking"]
    assert ranking["level"] == pytest.approx(1 - 0.05 / 3)
    assert all(p["separated"] for p in ranking["pairs"]), ranking["pairs"]
    assert {m: p["text"] for m, p in ranking["places"].items()} == {
        "anthropic/claude-better": "1", "anthropic/claude-ref": "2", "anthropic/claude-worse": "3"}

    gate = run_record["gate"]
    assert gate["status"] == "fail" and gate["exit_code"] == 10
    assert {m: g["status"] for m, g in gate["models"].items()} == {
        "anthropic/claude-better": "pass", "anthropic/claude-ref": "none", "anthropic/claude-worse": "fail"}
    failed = [c for c in gate["checks"] if c["verdict"] == "fail"]
    assert [c["model"] for c in failed] == ["anthropic/claude-worse"]
    assert records["anthropic/claude-worse"]["comparison"]["baseline_model"] == "anthropic/claude-ref"
    assert set(run_record["models"]["cost"]) == set(models)
    for spec, cost in run_record["models"]["cost"].items():  # the server's own count, model by model
        served, (inp, outp) = srv.stats.by_model[spec.split("/", 1)[1]], PRICES[spec.split("/", 1)[1]]
        assert cost["calls"] == served["answered"] == 200 and cost["sent_input_tokens"] == served["input_tokens"]
        assert cost["usd"] == pytest.approx((served["input_tokens"] * inp + served["output_tokens"] * outp) / 1e6)
        assert records[spec]["usage"]["usd"] == cost["usd"] and records[spec]["usage"]["calls"] == 200
    assert run_record["usage"]["calls"] == 600 == srv.stats.endpoints["messages"]
    from pytest_longctx.reporting.decision import run_status

    assert run_record["usage"]["trials"] == run_status(run_record).trials == 600  # the verdict box's count adds up

    html = (report / "longctx.html").read_text(encoding="utf-8")
    assert "Models side by side" in html and html.count("lrt: models side by side") == 1
    assert "<dt>model calls</dt><dd>600 " in html and "<dt>per model</dt>" in html
    assert "lrt: models side by side" in out  # and in the terminal

"""Several ``--longctx-model`` in one session with the fake models: test ids, records, usage errors; and one
``--longctx-model`` exactly as before (same test ids, same record)."""

from __future__ import annotations

import json
from typing import Any

import pytest

EVAL = """
import pytest

from pytest_longctx import Request

pytestmark = pytest.mark.longctx("demo")


@pytest.mark.parametrize("filler", [4, 16])
async def test_passkey(longctx, filler):
    keys = [longctx.rng.randrange(10_000, 99_999) for _ in range(4)]
    text = "The sky is blue. " * filler + f"The pass key is {keys[0]}."
    longctx.expect(keys[0], wrong=keys[1:])
    answer = await longctx.ask(Request.user(text + " What is the pass key?", max_tokens=16, template="t@1"))
    longctx.record(answer=answer.strip(), item=f"key-{keys[0]}")
    assert str(keys[0]) in answer
"""

#: The fields of a one-model run's record and of its trials, as they were before several models could run.
RECORD_FIELDS = {"schema", "version", "settings", "fixtures", "evidence", "cells", "trials", "usage", "stopped",
                 "missing_data", "comparison", "gate", "experiments", "effective_length", "tables", "chance", "notes"}
TRIAL_FIELDS = {"nodeid", "experiment", "params", "sample", "seed", "outcome", "item", "expected", "answer", "raw",
                "reason", "error", "calls", "cache_hits", "input_tokens", "output_tokens", "paid_input_tokens",
                "paid_output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "latency_s", "detail",
                "cluster"}


@pytest.fixture
def runner(longctx_runner: Any) -> Any:
    longctx_runner.pytester.makepyfile(test_eval=EVAL)
    return longctx_runner


def _models(*specs: str) -> list[str]:
    return [a for s in specs for a in ("--longctx-model", s)]


def test_one_model_runs_as_before(runner: Any) -> None:
    """Same test ids (no model in them), same record: no ``models``, no model on trials, no per-model folder."""
    collected = runner.pytester.runpytest_inprocess("--collect-only", "-q", "--longctx-model", "fake/perfect",
                                                    "--longctx-samples", "2")
    ids = [line for line in collected.outlines if "::" in line]
    assert ids == [f"test_eval.py::test_passkey[{f}-s{s}]" for f in (4, 16) for s in (0, 1)]
    done = runner.run("--longctx-samples", "2", "--longctx-threshold", "*:min=0.5")
    assert done.ret == 0
    record = done.record
    assert set(record) == RECORD_FIELDS
    assert "models" not in record["settings"] and "reference" not in record["settings"]
    assert all(set(t) == TRIAL_FIELDS for t in record["trials"])
    assert record["settings"]["model"] == "fake/perfect" and [c["verdict"] for c in record["gate"]["checks"]] == [
        "pass"]
    assert not (done.report_dir / "models").exists()
    assert "models side by side" not in done.result.stdout.str()


def test_one_model_from_the_ini_file_too(runner: Any) -> None:
    runner.project('longctx_model = "fake/wrong"')
    done = runner.run("--longctx-samples", "2", model=None)
    assert done.record["settings"]["model"] == "fake/wrong" and "models" not in done.record


@pytest.mark.parametrize("mode", [["-n", "2"], ["-p", "no:xdist"]], ids=["n2", "no-xdist"])
def test_each_condition_runs_for_each_model(runner: Any, mode: list[str]) -> None:
    done = runner.run(*_models("fake/perfect", "fake/wrong", "fake/random"), "--longctx-samples", "8",
                      "--longctx-threshold", "*:max-drop=0", *mode, model=None)
    assert done.ret == 10, done.result.stdout.str()  # fake/wrong and fake/random drop against fake/perfect
    # (16 items: fewer single-trial items than the test's critical value squared can never show a drop)
    record = done.record
    assert record["settings"]["model"] == "fake/perfect"  # the first is the reference
    assert len(record["trials"]) == 16 and {t["model"] for t in record["trials"]} == {"fake/perfect"}
    per_model = {}
    for spec in ("fake/perfect", "fake/wrong", "fake/random"):
        path = done.report_dir / "models" / spec.replace("/", "-") / "longctx.json"
        per_model[spec] = json.loads(path.read_text(encoding="utf-8"))
        ids = sorted(t["nodeid"].split("::")[1] for t in per_model[spec]["trials"])
        slug = spec.replace("/", "-")
        assert ids == sorted(f"test_passkey[{f}-{slug}-s{s}]" for f in (4, 16) for s in range(8))
    seeds = [sorted(t["seed"] for t in r["trials"]) for r in per_model.values()]
    assert seeds[0] == seeds[1] == seeds[2]  # the same seed-derived items for each model
    assert per_model["fake/wrong"]["gate"]["status"] == "fail"
    assert per_model["fake/perfect"]["gate"]["status"] == "none"  # its relative check is the others'
    side = record["models"]["experiments"]["demo"]
    assert side["models"]["fake/wrong"]["vs_reference"]["diff"] == -1.0
    places = side["ranking"]["places"]  # 16 pairs separate fake/perfect from fake/wrong only
    assert (places["fake/perfect"]["best"], places["fake/wrong"]["best"], places["fake/wrong"]["worst"]) == (1, 2, 3)


def test_the_reference_can_be_named(runner: Any) -> None:
    done = runner.run(*_models("fake/perfect", "fake/wrong"), "--longctx-reference", "wrong",
                      "--longctx-samples", "2", "--longctx-threshold", "*:max-drop=0", model=None)
    assert done.ret == 0  # fake/perfect gains on the reference fake/wrong: no drop
    assert done.record["settings"]["model"] == "fake/wrong"
    assert done.record["models"]["experiments"]["demo"]["models"]["fake/perfect"]["vs_reference"]["diff"] == 1.0


@pytest.mark.parametrize(("args", "message"), [
    (["--longctx-model", "fake/wrong", "--longctx-reference", "fake/random"], "not one of the models"),
    (["--longctx-reference", "fake/perfect"], "needs several --longctx-model"),
    (["--longctx-model", "fake/perfect"], "is given twice"),
], ids=["not-a-model", "one-model", "twice"])
def test_bad_model_options_are_one_line_usage_errors(runner: Any, args: list[str], message: str) -> None:
    done = runner.run(*args)
    assert done.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in done.result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1 and message in errors[0], done.result.stderr.str()
    assert "Traceback" not in done.result.stderr.str()


def test_batch_serves_one_model(runner: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-dummy")
    done = runner.run(*_models("anthropic/claude-a", "anthropic/claude-b"), "--longctx-batch", model=None,
                      cache=True)
    assert done.ret == pytest.ExitCode.USAGE_ERROR
    assert "with several --longctx-model run live" in done.result.stderr.str()


@pytest.mark.e2e
def test_an_in_process_and_a_remote_model_each_get_their_own_backend(runner: Any, api: Any) -> None:
    """fake/wrong answers in-process; anthropic/claude-test through the local Messages API (always right): each
    trial reaches its own model's backend, and only the remote model's requests reach the server."""
    srv = api()
    done = runner.run(*_models("anthropic/claude-test", "fake/wrong"), "--longctx-samples", "3", "-n", "2",
                      "--longctx-prices", "anthropic/claude-test=3/15", model=None)
    assert done.ret == 0, done.result.stdout.str()
    side = done.record["models"]["experiments"]["demo"]["models"]
    assert side["anthropic/claude-test"]["pooled"]["accuracy"] == 1.0 and side["fake/wrong"]["pooled"]["accuracy"] == 0
    assert len(srv.stats.requests) == 6 and {b["model"] for b in srv.stats.requests} == {"claude-test"}
    cost, served = done.record["models"]["cost"], srv.stats.by_model["claude-test"]
    remote = cost["anthropic/claude-test"]  # each model's requests, tokens and dollars: the server's own count
    assert remote["calls"] == served["answered"] == 6 and remote["sent_input_tokens"] == served["input_tokens"]
    assert remote["usd"] == pytest.approx((served["input_tokens"] * 3 + served["output_tokens"] * 15) / 1e6)
    assert cost["fake/wrong"]["calls"] == 6 and cost["fake/wrong"]["usd"] == 0  # in-process: counted, free
    assert done.record["usage"]["calls"] == 12 and done.record["usage"]["models"]["fake/wrong"]["calls"] == 6


def test_with_a_compared_run_every_model_is_gated_against_it(runner: Any) -> None:
    first = runner.run("--longctx-samples", "8", report_dir="prod")
    compared = str(first.report_dir / "longctx.json")
    done = runner.run(*_models("fake/wrong", "fake/perfect"), "--longctx-samples", "8", "--longctx-compare", compared,
                      "--longctx-threshold", "*:max-drop=0", model=None)
    assert done.ret == 10
    gate = done.record["gate"]
    assert {m: g["status"] for m, g in gate["models"].items()} == {"fake/wrong": "fail", "fake/perfect": "pass"}
    assert [c["model"] for c in gate["checks"]] == ["fake/wrong", "fake/perfect"]
    assert gate["alpha_each"] == pytest.approx(0.025)  # both gated: Bonferroni over the two
    assert done.record["comparison"]["baseline_model"] == "fake/perfect"  # the reference (fake/wrong) vs the file


def test_a_plan_costs_each_model_and_states_one_model_s_design(runner: Any) -> None:
    done = runner.run(*_models("fake/perfect", "fake/wrong"), "--longctx-samples", "3", "--longctx-plan",
                      model=None)
    assert done.ret == 0, done.result.stdout.str()
    plan = done.plan_record["plan"]
    assert {m: p["requests"] for m, p in plan["models"].items()} == {"fake/perfect": 6, "fake/wrong": 6}
    assert plan["power"]["experiments"]["demo"]["trials"] == 6  # what each model's comparison rests on


def test_several_models_from_the_ini_file(runner: Any) -> None:
    runner.project('longctx_model = ["fake/wrong", "fake/perfect"]\nlongctx_reference = "fake/perfect"')
    done = runner.run("--longctx-samples", "2", model=None)
    assert done.record["settings"]["models"] == ["fake/wrong", "fake/perfect"]
    assert done.record["settings"]["model"] == "fake/perfect"


def test_the_side_by_side_tables_escape_and_say_what_they_hold() -> None:
    from pytest_longctx.reporting.side_by_side import models_html, models_lines

    row = {"pooled": {"accuracy": 0.5, "low": 0.3, "high": 0.7}, "effective_length": None, "errors": 2,
           "series": [{"params": {"n": 1}, "accuracy": 0.5, "n": 4}]}
    models = {"reference": "fake/<a>", "order": ["fake/<a>", "fake/b"], "records": {},
              "cost": {"fake/<a>": {"calls": 4, "usd": 0.0}, "fake/b": {"calls": 4, "usd": 0.0}},
              "gate": {"fake/<a>": "none", "fake/b": "pass"},
              "experiments": {"x": {"models": {"fake/<a>": row, "fake/b": {**row, "vs_reference": {
                  "diff": -0.25, "low": -0.5, "high": 0.0}}}, "ranking": {"level": 0.95, "pairs": [], "places": {
                      "fake/<a>": {"text": "1-2"}, "fake/b": {"text": "1-2"}}}}}}
    html = models_html({"models": models})
    assert "fake/&lt;a&gt; (reference)" in html and "<a>" not in html
    assert "-0.250 [-0.50, +0.00]" in html and "a line per model" in html
    lines = models_lines(models)
    assert lines[0] == "x: models side by side" and any("1-2" in line and "fake/b" in line for line in lines)
    assert models_html({}) == "" and models_lines(None) == []

"""Saying plainly when an accuracy is indistinguishable from chance or from 0 (``reporting/chance.py``): next to each
cell's number, one line per experiment with the command that runs the same study on Claude, and in the record."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.backends import REFERENCE_MODEL
from pytest_longctx.reporting.chance import chance_lines, chance_report, experiment_interval, mark, verdict
from pytest_longctx.server.responders import last_user_text
from tests.passkey_api import MODEL

EVAL = '''
import pytest

from pytest_longctx import Oracle, Request

pytestmark = pytest.mark.longctx("coin")


@pytest.mark.parametrize("side", ["heads", "tails"])
async def test_coin(longctx, side):
    answer = await longctx.ask(Request.user(f"Say {side} (throw {longctx.sample}).", max_tokens=4, template="coin@1"),
                               oracle=Oracle(side, wrong=("heads" if side == "tails" else "tails",)))
    assert answer.strip() == side
'''
CONFTEST = '''
def pytest_longctx_chance(cells, trials):
    return {"coin": 0.5} if any(c["experiment"] == "coin" for c in cells) else {}
'''


@pytest.mark.parametrize(("n", "low", "high", "chance", "expected"), [
    (10, 0.0, 0.28, None, "zero"), (10, 0.0, 0.28, 1e-5, "chance"), (10, 0.11, 0.6, 0.25, "chance"),
    (10, 0.3, 0.9, 0.25, None), (10, 0.05, 0.4, None, None), (0, 0.0, 1.0, 0.25, None)])
def test_the_verdict_reads_the_interval(n: int, low: float, high: float, chance: float | None,
                                        expected: str | None) -> None:
    assert verdict(n, low, high, chance) == expected


def test_cells_and_experiments_are_marked() -> None:
    cells = [{"experiment": "qa", "correct": 3, "n": 10, "ci_low": 0.11, "ci_high": 0.6},
             {"experiment": "qa", "correct": 9, "n": 10, "ci_low": 0.6, "ci_high": 0.98}]
    assert [mark(c, 0.25) for c in cells] == ["≈ chance", ""]
    trials = [{"experiment": "qa", "outcome": "correct" if i < 12 else "incorrect", "cluster": f"q{i % 10}"}
              for i in range(20)]  # 10 questions asked twice: the interval counts 10 of them, not 20 trials
    correct, n, low, high = experiment_interval(trials)
    assert (correct, n) == (12, 20)
    independent = experiment_interval([{**t, "cluster": str(i)} for i, t in enumerate(trials)])
    assert high - low > independent[3] - independent[2]
    line = chance_lines({"model": "local/x", "experiments": [
        {"experiment": "lrt", "correct": 0, "n": 20, "ci_low": 0.0, "ci_high": 0.16, "chance": 1e-5,
         "verdict": "chance", "command": "pytest evals/lrt -n 2 --longctx-model anthropic/claude-x"}]})
    assert line == ["lrt: 0/20 correct, 95% CI [0.00, 0.16]: indistinguishable from chance (≈ 0) on local/x; "
                    "the same study on Claude: pytest evals/lrt -n 2 --longctx-model anthropic/claude-x"]


def heads(body: dict[str, Any]) -> str:
    """A model that says heads on even throws and tails on odd ones: right on half of each cell's throws, as
    guessing would be."""
    found = re.search(r"throw (\d+)", last_user_text(body))
    return "heads" if found and int(found.group(1)) % 2 == 0 else "tails"


def neither(body: dict[str, Any]) -> str:
    return "the coin rolled away"


@pytest.mark.e2e
@pytest.mark.parametrize("answer", [heads, neither], ids=["chance", "zero"])
def test_a_run_says_it_next_to_the_number_and_once_per_experiment(longctx_runner: Any, api: Any, answer: Any) -> None:
    api(answer)
    pytester = longctx_runner.pytester
    pytester.makepyfile(test_coin=EVAL)
    pytester.makeconftest(CONFTEST)
    run = longctx_runner.run("--longctx-samples", "6", "-n", "2", model=MODEL, cache=True)
    out = run.result.stdout.str()
    assert run.ret == 0, out
    (found,) = run.record["chance"]["experiments"]
    assert run.record["chance"]["levels"] == {"coin": 0.5}
    assert found["experiment"] == "coin" and found["command"] is None  # a remote model: nothing to suggest
    assert found["verdict"] == ("chance" if answer is heads else "zero")  # 0/12: [0, 0.24] holds no 0.5
    assert out.count(f"longctx: coin: {found['correct']}/12 correct") == 1 and f"on {MODEL}" in out
    marks = [line for line in out.splitlines() if line.startswith("coin ")]
    assert len(marks) == 2 and all(" ≈ " in line for line in marks), out


def test_the_local_model_is_told_the_same_study_on_claude(tmp_path: Path) -> None:
    trials = [{"experiment": "coin", "outcome": "correct" if i % 2 else "incorrect", "cluster": str(i),
               "nodeid": "evals/test_coin.py::test_coin[heads]"} for i in range(12)]
    report = chance_report([{"experiment": "coin"}], trials, {"coin": 0.5}, model="local/x",
                           hint_model=REFERENCE_MODEL, rootdir=tmp_path)
    (found,) = report["experiments"]
    assert found["verdict"] == "chance" and found["command"].endswith(
        f"test_coin.py -n 2 --longctx-model {REFERENCE_MODEL}")


@pytest.mark.parametrize("model", ["fake/perfect", "fake/random", "fake/wrong"])
def test_test_doubles_get_no_chance_notes(longctx_runner: Any, model: str) -> None:
    longctx_runner.pytester.makepyfile(test_coin=EVAL)
    longctx_runner.pytester.makeconftest(CONFTEST)
    run = longctx_runner.run("--longctx-samples", "1", model=model)
    out = run.result.stdout.str()
    assert run.record["chance"] == {"model": model, "levels": {}, "experiments": [], "too_few": [],
                                     "double": True}
    assert "indistinguishable" not in out and "≈" not in out and "too few trials" not in out, out


def test_too_few_trials_to_tell_anything_say_so(longctx_runner: Any, api: Any) -> None:
    api(heads)
    longctx_runner.pytester.makepyfile(test_coin=EVAL)
    longctx_runner.pytester.makeconftest(CONFTEST)
    run = longctx_runner.run("--longctx-samples", "1", model=MODEL, cache=True)
    out = run.result.stdout.str()
    assert run.record["chance"]["experiments"] == []  # 1/2 is no evidence of chance: 2/2 would not be either
    assert run.record["chance"]["too_few"] == [{"experiment": "coin", "correct": 1, "n": 2, "chance": 0.5}]
    assert out.count("longctx: coin: 1/2 correct: too few trials to tell from chance (0.5): even 2/2 correct would "
                     "not be; add trials (--longctx-samples)") == 1, out
    assert "indistinguishable" not in out and "≈" not in out, out

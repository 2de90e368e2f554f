"""Saying plainly when an accuracy is indistinguishable from chance or from 0 (``reporting/chance.py``): next to each
cell's number, one line per experiment with the command that runs the same study on Claude, and in the record."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_longctx.backends import REFERENCE_MODEL
from pytest_longctx.reporting.chance import chance_lines, experiment_interval, mark, verdict

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
         "verdict": "chance", "command": "pytest evals/lrt -n 8 --longctx-model anthropic/claude-x"}]})
    assert line == ["lrt: 0/20 correct, 95% CI [0.00, 0.16]: indistinguishable from chance (≈ 0) on local/x; "
                    "the same study on Claude: pytest evals/lrt -n 8 --longctx-model anthropic/claude-x"]


@pytest.mark.parametrize("model", ["fake/wrong", "fake/random"])
def test_a_run_says_it_next_to_the_number_and_once_per_experiment(longctx_runner: Any, model: str) -> None:
    pytester = longctx_runner.pytester
    pytester.makepyfile(test_coin=EVAL)
    pytester.makeconftest(CONFTEST)
    run = longctx_runner.run("--longctx-samples", "6", "-n", "2", model=model)
    out = run.result.stdout.str()
    assert run.ret == 0, out
    (found,) = run.record["chance"]["experiments"]
    assert run.record["chance"]["levels"] == {"coin": 0.5}
    command = f"test_coin.py -n 8 --longctx-model {REFERENCE_MODEL}"
    assert found["experiment"] == "coin" and found["command"].endswith(command)
    assert found["verdict"] == ("chance" if model == "fake/random" else "zero")  # 0/12: [0, 0.24] holds no 0.5
    assert out.count(f"longctx: coin: {found['correct']}/12 correct") == 1 and f"on {model}; the same study" in out
    marks = [line for line in out.splitlines() if line.startswith("coin ")]
    assert len(marks) == 2 and all(" ≈ " in line for line in marks), out

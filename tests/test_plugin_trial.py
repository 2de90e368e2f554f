"""The trial object: seeding, plain() conversion for worker -> controller records, ask/record/to_record."""

from __future__ import annotations

import asyncio
import enum
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from execnet.gateway_base import dumps, loads

from pytest_longctx import Oracle, Request, Trial
from pytest_longctx.backends.fake import FakeBackend
from pytest_longctx.dispatch.client import ModelClient
from pytest_longctx.session.trial import RAW_LIMIT, plain, trial_seed


def _trial(seed: int = 0, experiment: str = "demo", params: dict[str, Any] | None = None, sample: int = 0,
           model: str = "perfect") -> Trial:
    params = params if params is not None else {"lines": 10}
    return Trial(experiment=experiment, params=params, sample=sample, seed=trial_seed(seed, experiment, params, sample),
                 client=ModelClient(FakeBackend(model), None), nodeid=f"test_x.py::test[{sample}]", run_seed=seed)


def test_trial_seed_is_deterministic_and_identity_based() -> None:
    seed = trial_seed(0, "lrt", {"lines": 10, "shuffle": "none"}, 3)
    assert seed == trial_seed(0, "lrt", {"shuffle": "none", "lines": 10}, 3)  # param order is irrelevant
    assert 0 <= seed < 2**64
    others = {
        trial_seed(1, "lrt", {"lines": 10, "shuffle": "none"}, 3),
        trial_seed(0, "qa", {"lines": 10, "shuffle": "none"}, 3),
        trial_seed(0, "lrt", {"lines": 11, "shuffle": "none"}, 3),
        trial_seed(0, "lrt", {"lines": "10", "shuffle": "none"}, 3),
        trial_seed(0, "lrt", {"lines": 10, "shuffle": "none"}, 4),
        trial_seed(0, "lrt", {"lines": 10}, 3),
    }
    assert seed not in others and len(others) == 6


def test_trial_seed_known_value() -> None:
    """Pinned: changing the derivation silently changes every prompt of every experiment."""
    digest = hashlib.sha256(json.dumps([0, "demo", {}, 0]).encode()).digest()
    assert trial_seed(0, "demo", {}, 0) == int.from_bytes(digest[:8], "big")


def test_trial_rng_reproduces_the_same_choices() -> None:
    a, b = _trial(seed=7, sample=2), _trial(seed=7, sample=2)
    assert [a.rng.randrange(10**9) for _ in range(20)] == [b.rng.randrange(10**9) for _ in range(20)]
    other_sample, other_run = _trial(seed=7, sample=3), _trial(seed=8, sample=2)
    fresh = _trial(seed=7, sample=2).rng.random()
    assert fresh not in (other_sample.rng.random(), other_run.rng.random())


class Color(enum.Enum):
    RED = "red"
    ONE = 1


class Level(enum.IntEnum):
    HIGH = 3


class Shuffle(enum.StrEnum):
    BLOCK = "block-4"


@pytest.mark.parametrize(("value", "expected"), [
    (np.int64(7), 7),
    (np.int32(-2), -2),
    (np.float64(0.25), 0.25),
    (np.float32(0.5), 0.5),
    (np.bool_(True), True),
    (np.str_("none"), "none"),
    (Color.RED, "red"),
    (Color.ONE, 1),
    (Level.HIGH, 3),
    (Shuffle.BLOCK, "block-4"),
    (Path("/data/fr.xml"), "/data/fr.xml"),
    ((1, np.float64(2.5), [np.int8(3)]), [1, 2.5, [3]]),
    ({1: np.int64(2), "k": (np.str_("a"),)}, {"1": 2, "k": ["a"]}),
    (None, None),
    ("text", "text"),
    (True, True),
])
def test_plain_converts_to_exact_builtins(value: Any, expected: Any) -> None:
    got = plain(value)
    assert got == expected

    def exact(v: Any) -> None:
        assert type(v) in (type(None), bool, int, float, str, list, dict), type(v)
        for child in (v.values() if isinstance(v, dict) else v if isinstance(v, list) else ()):
            exact(child)

    exact(got)
    assert loads(dumps(got)) == expected  # execnet (xdist) can send it from a worker
    assert json.loads(json.dumps(got)) == expected


def test_record_and_to_record_are_plain() -> None:
    trial = _trial()
    trial.record(expected=np.int64(4), answer=np.str_("4"), item=np.str_("q1"), depth=np.float64(0.5), tags=("a",))
    record = trial.to_record("correct")
    assert (record["expected"], record["answer"], record["item"]) == (4, "4", "q1")
    assert record["detail"] == {"depth": 0.5, "tags": ["a"]}
    assert loads(dumps(record)) == record
    assert set(record) == {"nodeid", "experiment", "params", "sample", "seed", "outcome", "item", "expected", "answer",
                           "raw", "reason", "error", "calls", "cache_hits", "input_tokens", "output_tokens",
                           "paid_input_tokens", "paid_output_tokens", "cache_creation_input_tokens",
                           "cache_read_input_tokens", "latency_s", "detail"}


def test_ask_records_usage_and_raw_output() -> None:
    trial = _trial()
    answer = asyncio.run(trial.ask(Request.user("What is the key?", max_tokens=8), oracle=Oracle("12345")))
    assert answer == "12345"
    prefilled = asyncio.run(trial.ask(Request.user("Again?", prefill="Key: "), oracle=Oracle("12345")))
    assert prefilled == "Key: 12345"
    judge = ModelClient(FakeBackend("wrong"), None)
    assert asyncio.run(trial.ask("Is it right?", oracle=Oracle("yes", ("no",)), client=judge)) == "no"
    record = trial.to_record("incorrect", reason="wrong key")
    assert record["raw"] == "Key: 12345"  # the judge's answer is not the trial's raw output
    assert record["calls"] == 3 and record["input_tokens"] > 0 and record["output_tokens"] > 0
    assert record["reason"] == "wrong key" and record["outcome"] == "incorrect"


def test_raw_output_is_cut() -> None:
    trial = _trial()
    asyncio.run(trial.ask("long", oracle=Oracle("x" * (RAW_LIMIT + 100))))
    assert len(trial.to_record("correct")["raw"]) == RAW_LIMIT


def test_trial_exposes_model_facts() -> None:
    trial = _trial()
    assert trial.model == "fake/perfect"
    assert trial.tokenizer == "tiktoken/cl100k_base"
    assert trial.count_tokens("hello world") == 2
    assert trial.context_window == 200_000

"""Synthetic but schema-faithful run records for the HTML report tests.

Trials are plain trial records (as ``Trial.to_record`` makes them); cells, the record, the
comparison and the gate come from the plugin's own aggregator, run builder, compare and gating
code, so the report is tested on exactly what a run writes.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pytest_longctx.backends.model_spec import parse_model_spec
from pytest_longctx.gate_spec import parse_threshold
from pytest_longctx.results.aggregate import Aggregator
from pytest_longctx.results.evidence import by_experiment
from pytest_longctx.run_settings import Settings
from pytest_longctx.session.run import build_record, decide

PAYLOAD = "</script><script>document.title='PWNED'</script><img src=x onerror=\"document.title='PWNED'\"><!--"
TOKENIZER = "o200k_base (tiktoken, approximate)"
LETTERS = "ABCD"


def _rng(*parts: Any) -> random.Random:
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _trial(experiment: str, params: dict[str, Any], sample: int, correct: bool, *, item: str, expected: Any,
           answer: Any, raw: str, detail: dict[str, Any], error: str | None = None) -> dict[str, Any]:
    ids = "-".join(str(v) for v in params.values())
    outcome = "error" if error else "correct" if correct else "incorrect"
    tokens = int(detail.get("context_tokens", 800))
    return {
        "nodeid": f"evals/{experiment}/test_{experiment.replace('-', '_')}.py::test_{experiment.replace('-', '_')}"
                  f"[{ids}-s{sample}]",
        "experiment": experiment, "params": params, "sample": sample, "seed": sample * 7919, "outcome": outcome,
        "item": item, "expected": None if error else expected, "answer": None if error else answer,
        "raw": "" if error else raw,
        "reason": f"assert {answer!r} == {expected!r}" if outcome == "incorrect" else None,
        "error": error, "calls": 0 if error else 1, "cache_hits": int(sample % 3 == 0 and not error),
        "input_tokens": 0 if error else tokens, "output_tokens": 0 if error else 6, "latency_s": 0.8,
        "detail": {**detail, "tokenizer": TOKENIZER},
    }


def _mc(experiment: str, params: dict[str, Any], samples: int, p: float, model: str, quality: float,
        detail: dict[str, Any], error_rate: float) -> list[dict[str, Any]]:
    """Multiple-choice trials (qa and its controls)."""
    out = []
    for s in range(samples):
        q = _rng(experiment, params, s)
        m = _rng(model, experiment, params, s)
        expected = LETTERS[q.randrange(4)]
        item = f"FR-2024-02-12/q{q.randrange(395):03d}"
        ok = m.random() < min(0.99, max(0.0, p + quality))
        answer = expected if ok else q.choice([c for c in LETTERS if c != expected])
        error = "BackendError: 529 overloaded (after 4 retries)" if m.random() < error_rate else None
        out.append(_trial(experiment, params, s, ok, item=item, expected=expected, answer=answer,
                          raw=f"Looking at section {q.randrange(1, 40)} of the notice... Answer: {answer}",
                          detail=detail, error=error))
    return out


def qa_trials(model: str, quality: float, samples: int, error_rate: float) -> list[dict[str, Any]]:
    trials = []
    for depth in (0, 25, 50, 75, 100):
        for ctx in (4000, 16000, 64000):
            for prompt in ("plain", "quote-first"):
                for examples in (0, 3):
                    params = {"context_tokens": ctx, "depth": depth, "examples": examples, "prompt": prompt}
                    dip = 0.3 * math.exp(-(((depth - 50) / 28) ** 2)) * math.sqrt(ctx / 64000)
                    bonus = 0.04 * (prompt == "quote-first") + 0.02 * examples / 3
                    p = 0.93 - dip - 0.06 * math.log(ctx / 4000, 4) + bonus
                    detail = {"depth": depth, "context_tokens": ctx, "needle_token_offset": int(depth / 100 * ctx)}
                    trials += _mc("qa", params, samples, p, model, quality, detail, error_rate)
    for prompt in ("plain", "quote-first"):
        trials += _mc("qa-baseline", {"prompt": prompt}, samples, 0.9, model, quality, {"context_tokens": 900}, 0)
        trials += _mc("qa-control", {"prompt": prompt}, samples, 0.27, model, 0, {"context_tokens": 120}, 0)
    return trials


def lrt_trials(model: str, quality: float, samples: int, shuffle_penalty: float) -> list[dict[str, Any]]:
    trials = []
    for i, lines in enumerate((100, 400, 1600, 6400)):
        for shuffle, pen in (("none", 0.0), ("block", 0.12), ("full", 0.3)):
            params = {"lines": lines, "shuffle": shuffle}
            for s in range(samples):
                q, m = _rng("lrt", params, s), _rng(model, "lrt", params, s)
                target = q.randrange(lines)
                value = f"{q.randrange(16**6):06x}"
                p = 0.99 - 0.07 * i - pen * (i + 1) / 4 * shuffle_penalty + quality
                ok = m.random() < p
                detail: dict[str, Any] = {"lines": lines, "target_line": target, "context_tokens": lines * 14}
                answer = value
                if not ok:
                    if m.random() < 0.2:
                        detail.update(miss_line=None, miss_distance=None)
                        answer = f"{m.randrange(16**6):06x}"
                    else:
                        dist = m.choice((-3, -2, -1, -1, 1, 1, 1, 2, 2, 3, 5, -8))
                        detail.update(miss_line=target + dist, miss_distance=dist)
                        answer = f"{_rng('lrt-value', params, s, dist).randrange(16**6):06x}"
                trials.append(_trial("lrt", params, s, ok, item=f"line {target}", expected=value, answer=answer,
                                     raw=f"The value on line {target} is {answer}.", detail=detail))
    return trials


def _docs_trial(params: dict[str, Any], s: int, p: float, model: str, detail: dict[str, Any]) -> dict[str, Any]:
    q, m = _rng("docs", params, s), _rng(model, "docs", params, s)
    ok = m.random() < p
    item = f"handbook.md#q{q.randrange(60):02d}"
    expected = f"clause {q.randrange(1, 30)}.{q.randrange(1, 9)}"
    answer = expected if ok else f"clause {q.randrange(1, 30)}.{q.randrange(1, 9)}"
    judge = ok if m.random() < 0.92 else not ok
    return _trial("docs", params, s, ok, item=item, expected=expected, answer=answer,
                  raw=f"According to the handbook, {answer}.",
                  detail={**detail, "subspan": ok, "judge": judge, "judge_agree": judge == ok})


def docs_trials(model: str, quality: float, samples: int) -> list[dict[str, Any]]:
    """The docs experiment's two tests: answer position (depth) and context size per arm."""
    trials = []
    for depth in (0, 25, 50, 75, 100):
        for s in range(samples):
            p = 0.88 - 0.2 * math.exp(-(((depth - 50) / 30) ** 2)) + quality
            trials.append(_docs_trial({"depth": depth}, s, p, model, {"depth": depth, "context_tokens": 120_000}))
    for arm in ("long-context", "rag"):
        for fraction in (0, 25, 50, 75, 100):
            params = {"arm": arm, "context_fraction": fraction}
            for s in range(samples):
                recall = int(_rng(model, "recall", params, s).random() < 0.97 - fraction / 400)
                p = (0.93 - 0.2 * fraction / 100 if arm == "long-context" else 0.55 + 0.3 * recall) + quality
                detail: dict[str, Any] = {"context_tokens": 1200 * fraction + 800}
                if arm == "rag":
                    detail.update(retrieval_recall=recall, retrieval_rank=1 if recall else None)
                trials.append(_docs_trial(params, s, p, model, detail))
    return trials


def demo_trials(model: str, quality: float, samples: int) -> list[dict[str, Any]]:
    trials = []
    for filler in (10, 40, 160):
        params = {"filler_sentences": filler}
        for s in range(samples):
            q, m = _rng("demo", params, s), _rng(model, "demo", params, s)
            key = q.randrange(10_000, 99_999)
            ok = m.random() < 0.95 - filler / 800 + quality
            answer = str(key if ok else key + 1)
            trials.append(_trial("demo", params, s, ok, item=None, expected=key, answer=answer, raw=answer,
                                 detail={"context_tokens": filler * 20}))
    return trials


def settings_for(model: str, tmp: Path, thresholds: tuple[str, ...] = (), compare_path: Path | None = None,
                 samples: int = 10, seed: int = 0) -> Settings:
    spec = parse_model_spec(model)
    return Settings(model=spec, seed=seed, samples=samples, report_dir=tmp / "reports",
                    thresholds=tuple(parse_threshold(t) for t in thresholds), compare=compare_path, cache="on",
                    cache_dir=tmp / ".longctx-cache", max_concurrency=16, context_window=200_000, data_dir=None,
                    judge=spec, plan=False, rootdir=Path(__file__).resolve().parents[1])


def make_record(tmp: Path, *, model: str = "anthropic/claude-haiku-4-5", quality: float = 0.0, samples: int = 10,
                thresholds: tuple[str, ...] = (), baseline: dict[str, Any] | None = None,
                payload: str | None = None, shuffle_penalty: float = 1.0, error_rate: float = 0.01,
                stopped: str | None = None, errors_only: bool = False) -> dict[str, Any]:
    """A full run record with qa, controls, lrt, docs and demo cells (and optionally a comparison);
    ``errors_only``: every trial errored, as with ``--longctx-model fake/error``."""
    trials = (qa_trials(model, quality, samples, error_rate) + lrt_trials(model, quality, samples, shuffle_penalty)
              + docs_trials(model, quality, samples) + demo_trials(model, quality, samples))
    if errors_only:
        trials = [{**t, "outcome": "error", "expected": None, "answer": None, "raw": "", "reason": None, "calls": 0,
                   "cache_hits": 0, "input_tokens": 0, "output_tokens": 0,
                   "error": f"BackendError: {model}: injected error (HTTP 529 overloaded)"} for t in trials]
    if payload is not None:
        for exp in ("qa", "lrt"):
            miss = next(t for t in trials if t["experiment"] == exp and t["outcome"] == "incorrect")
            miss["answer"] = payload
            miss["raw"] = f"Sure! {payload}"
    agg = Aggregator()
    for t in trials:
        agg.add(t)
    compare_path = Path("reports/history/0041.json") if baseline else None
    settings = settings_for(model, tmp, thresholds, compare_path, samples)
    state = SimpleNamespace(aggregator=agg, started=1_760_000_000.0, stop_reason=stopped)
    declared = builtin_evidence()
    record = build_record(settings, state, 1_760_000_312.5, 1, declared)
    decide(record, settings.gate, declared, json.loads(json.dumps(baseline)) if baseline else None, [])
    return json.loads(json.dumps(record))  # exactly what longctx.json would hold


def builtin_evidence() -> dict[str, Any]:
    """The units of evidence the built-in experiments declare through their hooks, as a run gathers them."""
    from pytest_longctx.experiments.docs import plugin as docs
    from pytest_longctx.experiments.litm import plugin as litm
    from pytest_longctx.experiments.lrt import plugin as lrt
    from pytest_longctx.experiments.qa import plugin as qa

    return by_experiment(e for m in (qa, lrt, docs, litm) for e in m.pytest_longctx_evidence())


def showcase_record(tmp: Path, payload: str | None = None) -> dict[str, Any]:
    """A candidate model compared with a stronger baseline: the record the screenshot shows."""
    baseline = make_record(tmp, model="anthropic/claude-sonnet-4-5", quality=0.03, samples=16, shuffle_penalty=0.3)
    return make_record(tmp, model="anthropic/claude-haiku-4-5", samples=16, baseline=baseline, payload=payload,
                       shuffle_penalty=2.0, thresholds=("*:0.5", "experiment=lrt,shuffle=none:0.9",
                                                        "experiment=lrt:max-drop=0", "experiment=lrt:max-drop=0/each"))


def error_record(tmp: Path) -> dict[str, Any]:
    """Every trial errored (an endpoint that only fails): the report must say so at the top, with the exit code."""
    return make_record(tmp, model="fake/error", samples=4, errors_only=True)


def single_record(tmp: Path) -> dict[str, Any]:
    """One model, no compared run, one threshold: the plainest report."""
    return make_record(tmp, samples=16, thresholds=("*:0.5",), error_rate=0.0)


def models_record(tmp: Path) -> dict[str, Any]:
    """Three models in one run (the first the reference), gated against it on the LRT: one session's record."""
    import dataclasses

    from pytest_longctx.session.model_gates import decide_models

    specs = {"anthropic/claude-sonnet-4-5": (0.03, 0.3), "anthropic/claude-haiku-4-5": (0.0, 2.0),
             "anthropic/claude-opus-4-1": (0.05, 0.2)}
    agg = Aggregator()
    for spec, (quality, penalty) in specs.items():
        trials = (qa_trials(spec, quality, 12, 0.0) + lrt_trials(spec, quality, 12, penalty)
                  + docs_trials(spec, quality, 12) + demo_trials(spec, quality, 12))
        for t in trials:  # each model its own test id, as the plugin's model parameter makes it
            agg.add({**t, "model": spec, "nodeid": t["nodeid"][:-1] + "-" + spec.replace("/", "-") + "]"})
    reference = next(iter(specs))
    settings = dataclasses.replace(settings_for(reference, tmp, ("experiment=lrt:max-drop=0",), samples=12),
                                   models=tuple(parse_model_spec(s) for s in specs))
    state = SimpleNamespace(aggregator=agg, started=1_760_000_000.0, stop_reason=None, notes=[])
    record, _ = decide_models(settings, state, 1_760_000_312.5, 1, builtin_evidence(), build_record, decide)
    return json.loads(json.dumps(record))


def builtin_sections(record: dict[str, Any]) -> list[Any]:
    """The report sections the built-in experiments contribute through their hooks, as a run would."""
    from pytest_longctx.experiments.docs import plugin as docs
    from pytest_longctx.experiments.litm import plugin as litm
    from pytest_longctx.experiments.lrt import plugin as lrt
    from pytest_longctx.experiments.qa import plugin as qa
    from pytest_longctx.reporting.sections import arrange

    cells, trials = record.get("cells", []), record.get("trials", [])
    return arrange([m.pytest_longctx_report_sections(cells, trials) for m in (qa, lrt, docs, litm)], cells)

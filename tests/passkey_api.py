"""A pass-key eval answered by the local Messages-API server: shared by the Anthropic, prefetch and batch tests.

The server's responder reads the pass key out of the prompt, so it always answers correctly: any
``incorrect`` trial would be a fault counted as a wrong answer. The SDK finds the server through
``ANTHROPIC_BASE_URL``; the API key is a distinctive dummy that must never be written anywhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_longctx.server import MessagesServer
from pytest_longctx.server.responders import last_user_text

MODEL = "anthropic/claude-test"
SECRET = "sk-ant-test-SECRET-123"
TEMPLATE = "demo-passkey@1"

EVAL = f'''
import pytest

from pytest_longctx import Request

FILLER = "The grass is green. The sky is blue. The sun is yellow. "
pytestmark = pytest.mark.longctx("demo")


@pytest.mark.parametrize("filler", [4, 16])
async def test_passkey(longctx, filler):
    key = longctx.rng.randrange(10_000, 99_999)
    cut = longctx.rng.randrange(filler + 1)
    text = FILLER * cut + f"The pass key is {{key}}. Remember it. " + FILLER * (filler - cut)
    request = Request.user(text + "\\n\\nWhat is the pass key?", max_tokens=16, template="{TEMPLATE}")
    answer = await longctx.ask(request)
    longctx.record(expected=key, answer=answer.strip())
    assert str(key) in answer
'''


def passkey(body: dict[str, Any]) -> str:
    """A model that is always right: the pass key stated in the prompt."""
    found = re.search(r"The pass key is (\d+)", last_user_text(body))
    return found.group(1) if found else "no pass key here"


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """``api(responder=passkey, **server_options)`` starts a local Messages API and points the SDK (and
    pytester runs) at it; the responder defaults to the always-right pass-key model."""
    servers: list[MessagesServer] = []

    def start(responder: Any = passkey, **kwargs: Any) -> MessagesServer:
        srv = MessagesServer(responder, **kwargs).start()
        servers.append(srv)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.base_url)
        return srv

    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    yield start
    for srv in servers:
        srv.stop()


@pytest.fixture
def runner(longctx_runner: Any) -> Any:
    longctx_runner.pytester.makepyfile(test_eval=EVAL)
    return longctx_runner

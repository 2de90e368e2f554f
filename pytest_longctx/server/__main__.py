"""``python -m pytest_longctx.server``: serve the fake Messages API (and its OpenAI dialect) until Ctrl-C.

The first line on stdout is the base URL (``http://127.0.0.1:PORT``), so a script can start the
server with ``--port 0`` and read where it listens, e.g. for ``ANTHROPIC_BASE_URL``, or with
``/v1`` appended for ``OPENAI_BASE_URL``.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from .batches import MAX_BYTES, MAX_REQUESTS
from .faults import FAULT_ENDPOINTS, FAULT_KINDS, GENERATION_ENDPOINTS, STICKY_MODES, FaultPlan
from .graded import SPEC_HELP
from .messages_api import MessagesServer
from .prompt_cache import LIFETIME_S, PromptCache

#: The fault plan's fields the command line sets, and the option (``args`` attribute) that sets each.
_FAULT_PLAN = {"rate": "fault_rate", "kinds": "faults", "seed": "seed", "sticky": "sticky",
               "retry_after": "retry_after", "timeout_hold": "timeout_hold", "endpoints": "fault_endpoints"}
#: The server's keyword arguments that the option of the same name sets as it is.
_SERVER = ("host", "port", "latency", "api_key", "batch_delay", "batch_error_rate", "batch_expire_rate",
           "batch_max_requests", "batch_max_bytes", "seed")


def _latency(text: str) -> float | tuple[float, float]:
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected SECONDS or MIN,MAX, got {text!r}") from None
    if len(values) == 1 and values[0] >= 0:
        return values[0]
    if len(values) == 2 and 0 <= values[0] <= values[1]:
        return (values[0], values[1])
    raise argparse.ArgumentTypeError(f"expected SECONDS or MIN,MAX with 0 <= MIN <= MAX, got {text!r}")


def _names(text: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in text.split(",") if name.strip())


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    parser = argparse.ArgumentParser(
        prog="python -m pytest_longctx.server",
        description="Serve a fake Anthropic Messages API, OpenAI chat completions (/v1/chat/completions) and "
        "llama.cpp's /completion, with scripted answers, latency and faults.",
        epilog=SPEC_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = parser.add_argument
    add("--host", default="127.0.0.1", help="interface to bind (default: 127.0.0.1)")
    add("--port", type=int, default=0, help="port; 0 picks a free one (default: 0)")
    add("--responder", default="echo", help="echo, fixed:<text>, scripted:<file.json>, or graded:<spec>, a model of "
        "known accuracy on the suite's experiments (below) (default: echo)")
    add("--latency", type=_latency, default=0.0, help="SECONDS or MIN,MAX per message (default: 0)")
    add("--fault-rate", type=float, default=0.0, help="probability of a fault per request (default: 0)")
    add("--faults", type=_names, default=FAULT_KINDS, help=f"fault kinds (default: {','.join(FAULT_KINDS)})")
    add(
        "--fault-endpoints",
        type=_names,
        default=GENERATION_ENDPOINTS,
        help=f"of {','.join(FAULT_ENDPOINTS)} (default: {','.join(GENERATION_ENDPOINTS)})",
    )
    add("--sticky", choices=STICKY_MODES, default=None, help="answer every request with this error (default: off)")
    add("--seed", type=int, default=0, help="seed of the fault, latency and batch draws (default: 0)")
    add("--retry-after", type=float, default=1.0, help="retry-after seconds of 429 faults (default: 1)")
    add("--timeout-hold", type=float, default=2.0, help="seconds a timeout fault holds a request (default: 2)")
    add("--api-key", default=None, help="expected x-api-key; others get 401 (default: accept any)")
    add("--batch-delay", type=float, default=0.5, help="seconds a batch stays in_progress (default: 0.5)")
    add("--batch-error-rate", type=float, default=0.0, help="fraction of batch requests errored (default: 0)")
    add("--batch-expire-rate", type=float, default=0.0, help="fraction of batch requests expired (default: 0)")
    add("--batch-max-requests", type=int, default=MAX_REQUESTS,
        help=f"most requests per batch; more is a 400 (default: the API's {MAX_REQUESTS:,})")
    add("--batch-max-bytes", type=int, default=MAX_BYTES,
        help=f"largest batch body in bytes; more is a 413 (default: the API's 256 MB, {MAX_BYTES:,})")
    add("--prompt-cache-lifetime", type=float, default=LIFETIME_S,
        help=f"seconds a prompt-cache entry lives after its last use (default: {LIFETIME_S:.0f})")
    add("--prompt-cache-min-tokens", type=int, default=None,
        help="shortest cacheable prefix in tokens (default: the model's, e.g. 1024 for Sonnet, 2048 for Haiku 3)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Start the server, print its base URL, and serve until interrupted."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        plan = FaultPlan(**{field: getattr(args, option) for field, option in _FAULT_PLAN.items()})
        server = MessagesServer(args.responder, faults=plan,
                                prompt_cache=PromptCache(args.prompt_cache_lifetime, args.prompt_cache_min_tokens),
                                **{name: getattr(args, name) for name in _SERVER})
    except (ValueError, OSError) as exc:
        parser.error(str(exc))

    def terminate(*_: Any) -> None:
        raise KeyboardInterrupt

    for signum in (signal.SIGINT, signal.SIGTERM):  # SIGINT too: a background `&` job starts with it ignored
        signal.signal(signum, terminate)
    with server:
        print(server.base_url, flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            print("stopping", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

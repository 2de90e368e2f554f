"""Batch mode: the run's requests go through the provider's batch API (``Provider.batch_api``; Anthropic's
Message Batches API: half price), then tests score them.

Flow (controller, before the workers start): the child plan run lists every uncached request;
requests already in a submitted, uncollected batch are not submitted again; the rest go out as
new batches (each recorded in ``<cache-dir>/batches/<id>.json`` right after it is created, so a run
interrupted between submit and collect resumes by polling the same batches); ended batches are
collected into the response cache (errored items become error files, never cache entries) and
marked collected, so a re-run downloads nothing twice. Tests then find their answers in the cache.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_longctx.backends.base import Request
from pytest_longctx.backends.registry import load, provider_of
from pytest_longctx.dispatch.cache import ResponseCache
from pytest_longctx.dispatch.plan import read_plan
from pytest_longctx.dispatch.prefetch import sent_path, write_error
from pytest_longctx.errors import UsageError
from pytest_longctx.util.fsutil import atomic_write_text

if TYPE_CHECKING:
    from pytest_longctx.session.options import Settings

#: Seconds between polls of an unfinished batch ($LONGCTX_BATCH_POLL overrides).
POLL_S = 30.0
MAX_PER_BATCH = 10_000


@dataclass
class BatchRun:
    """What this run submitted, reused and collected (for the summary and the run record)."""

    submitted: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)
    requests_submitted: int = 0
    collected: int = 0
    errored: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"submitted": self.submitted, "resumed": self.resumed, "requests_submitted": self.requests_submitted,
                "collected": self.collected, "errored": self.errored}


def _state_dir(cache_dir: Path) -> Path:
    return cache_dir / "batches"


def _save(path: Path, state: dict[str, Any]) -> None:
    atomic_write_text(path, json.dumps(state, indent=1))


def open_batches(cache_dir: Path, model: str) -> dict[str, dict[str, Any]]:
    """Submitted, not yet collected batches of ``model`` by id."""
    out = {}
    folder = _state_dir(cache_dir)
    if folder.is_dir():
        for path in sorted(folder.glob("*.json")):
            state = json.loads(path.read_text(encoding="utf-8"))
            if state.get("model") == model and not state.get("collected"):
                out[state["id"]] = state
    return out


def run_batches(settings: Settings, cache: ResponseCache, work: Path, plan_file: Path,
                log: Callable[[str], None] = print, client: Any = None) -> BatchRun:
    """Submit what is missing, wait for every relevant batch, collect results into the cache.

    The provider's batch API (``Provider.batch_api``) does the calls; ``client`` is handed to it (its SDK client).
    """
    provider = provider_of(settings.model)
    api = load(provider.batch_api)(client, seed=settings.seed)
    model = settings.model.name
    run = BatchRun()
    planned: dict[str, dict[str, Any]] = {}
    for entry in read_plan(plan_file):
        if cache.get(entry["key"]) is None:
            planned.setdefault(entry["key"], entry)
    (work / "keys.txt").write_text("\n".join(sorted(planned)), encoding="utf-8")
    if not planned:
        return run
    pending = open_batches(settings.cache_dir, model)
    in_flight = {key for state in pending.values() for key in state["keys"]}
    relevant = {bid: s for bid, s in pending.items() if set(s["keys"]) & planned.keys()}
    run.resumed = sorted(relevant)
    todo = [planned[k] for k in sorted(planned) if k not in in_flight]
    for start in range(0, len(todo), MAX_PER_BATCH):
        chunk = todo[start:start + MAX_PER_BATCH]
        state = _submit(api, model, chunk, settings.cache_dir)
        relevant[state["id"]] = state
        run.submitted.append(state["id"])
        run.requests_submitted += len(chunk)
        log(f"longctx batch: submitted {state['id']} with {len(chunk)} requests")
    for bid in run.resumed:
        log(f"longctx batch: resuming {bid} ({len(relevant[bid]['keys'])} requests submitted earlier)")
    poll = float(os.environ.get("LONGCTX_BATCH_POLL", POLL_S))
    for bid, state in relevant.items():
        _wait(api, bid, poll, log)
        _collect(api, provider.name, state, cache, work, run, settings.cache_dir)
    return run


def _submit(api: Any, model: str, entries: list[dict[str, Any]], cache_dir: Path) -> dict[str, Any]:
    requests = [(e["key"], Request.from_json(e["request"])) for e in entries]
    try:
        batch_id = api.submit(model, requests)
    except Exception as exc:  # one clear line for the user
        raise UsageError(f"--longctx-batch: could not submit the batch ({type(exc).__name__}: {exc})") from None
    state = {"id": batch_id, "model": model, "keys": [e["key"] for e in entries], "submitted": time.time(),
             "collected": False}
    _save(_state_dir(cache_dir) / f"{batch_id}.json", state)
    return state


def _wait(api: Any, batch_id: str, poll: float, log: Callable[[str], None]) -> None:
    last = ""
    while True:
        ended, line = api.poll(batch_id)
        if ended:
            return
        if line != last:
            log(line)
            last = line
        time.sleep(poll)


def _collect(api: Any, provider: str, state: dict[str, Any], cache: ResponseCache, work: Path, run: BatchRun,
             cache_dir: Path) -> None:
    for key, completion, error in api.results(state["id"]):
        if completion is not None:
            sent = sent_path(work, key)  # answered through this run's batches: not a cache hit
            sent.parent.mkdir(parents=True, exist_ok=True)
            sent.touch()
            if cache.get(key) is None:
                cache.put(key, completion.to_json(), {"provider": provider, "model": state["model"],
                                                      "batch": state["id"]})
            run.collected += 1
        else:
            write_error(work, key, f"batch {state['id']}: {error}", False)
            run.errored += 1
    state["collected"] = True
    state["collected_at"] = time.time()
    _save(_state_dir(cache_dir) / f"{state['id']}.json", state)

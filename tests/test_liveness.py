"""Liveness of the sequential gate's prefetch (issue 38 item 9): no test waits on an answer nothing will deliver.

The hang it fixes: with ``--longctx-sequential`` the dispatcher may start only a window of requests beyond the
reported tests. It counted requests started, and its lanes took entries they could not yet start. Prompt-cache
siblings far ahead in the plan (qa's block design asks a question's variants at different sample indexes; a
question asked again later reuses its context) are released the moment their first request is answered and jump
the queue: they used up the window while the test every worker needed next sat behind them, unsent. Every worker
waited inside a test, the dispatcher waited for reports, and nothing ended it (qa position cells at 2,000 and
8,000 tokens, 60 samples, ``-n 4``: 1,409 of 2,880 trials, then nothing; reproduced here at 120 trials).

Now a lane takes only what it may send (the window places a request by its test's sample group, so the lowest
test not yet reported is always inside), a request a test waits for goes out whatever the window says, and a
request nothing can deliver ends its test with an error naming it (``Dispatcher._watch``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.backends.base import Request
from pytest_longctx.dispatch.cache import ResponseCache
from pytest_longctx.dispatch.lanes import LaneQueue
from pytest_longctx.dispatch.ordering import group_sizes, group_starts, place
from pytest_longctx.dispatch.policy import PlannedRequest, Settled, Trial
from pytest_longctx.dispatch.prefetch import Dispatcher
from pytest_longctx.dispatch.waiter import Waiter
from pytest_longctx.dispatch.workdir import error_path
from pytest_longctx.errors import BackendError
from pytest_longctx.server.graded import Graded
from pytest_longctx.server.responders import last_user_text

#: Three cells; from sample j*AHEAD on, cell j's prompt shares its context (a prompt-cache prefix) with cell 0's
#: prompt j*AHEAD samples before: siblings far ahead of their first request, as in qa's block design (a question's
#: variants at different sample indexes, a question asked again later).
EVAL = '''
import pytest

from pytest_longctx import Request

AHEAD = {ahead}
pytestmark = pytest.mark.longctx("demo")


@pytest.mark.parametrize("part", [0, 1, 2])
async def test_far_siblings(longctx, part):
    shared = longctx.sample - part * AHEAD if longctx.sample >= part * AHEAD else longctx.sample
    owner = 0 if shared != longctx.sample else part
    context = f"Document {{shared}} of part {{owner}}. " + "Filler. " * 40
    prompt = context + f"Question of part {{part}}, sample {{longctx.sample}}: yes or no?"
    answer = await longctx.ask(Request.user(prompt, max_tokens=4, template="demo-far@1",
                                            cache_prefix=len(context)))
    longctx.record(expected="yes", answer=answer)
    assert answer == "yes"
'''


def coin(body: dict[str, Any]) -> str:
    """Right or wrong by a fair coin of the model and the prompt: two models disagree on half the items, so the
    sequential gate cannot settle early and the run must go through its whole design."""
    digest = hashlib.sha256(f"{body.get('model')}|{last_user_text(body)}".encode()).digest()
    return "yes" if digest[0] % 2 == 0 else "no"


def _run(runner: Any, model: str, report: str, *args: str, subprocess: bool = False) -> Any:
    return runner.run("--longctx-samples", "40", "--longctx-max-concurrency", "8", *args, model=f"anthropic/{model}",
                      report_dir=report, cache=True, subprocess=subprocess)


@pytest.mark.e2e
@pytest.mark.parametrize("dist", [("-n", "2"), ("-p", "no:xdist")], ids=["n2", "no-xdist"])
def test_far_prompt_cache_siblings_do_not_stall_the_sequential_window(longctx_runner: Any, api: Any,
                                                                      dist: tuple[str, ...]) -> None:
    """120 trials, window 32, two siblings 12 and 24 samples ahead of each first request: before the fix the
    released siblings used up the window and the run hung (both ways)."""
    srv = api(coin)
    longctx_runner.pytester.makepyfile(test_eval=EVAL.format(ahead=12))
    base = _run(longctx_runner, "claude-prod", "prod", "-p", "no:xdist")
    assert base.ret in (0, 1) and len(base.record["trials"]) == 120
    run = _run(longctx_runner, "claude-next", "next", *dist, "--longctx-compare",
               str(longctx_runner.pytester.path / "prod" / "longctx.json"),
               "--longctx-threshold", "experiment=demo:max-drop=0", "--longctx-sequential", subprocess=True)
    out = run.result.stdout.str() + run.result.stderr.str()
    assert "INTERNALERROR" not in out
    record = run.record
    seq = record["sequential"]
    assert not record.get("stopped"), out
    answered = [t for t in record["trials"] if t["outcome"] != "error"]
    assert len(answered) == len(record["trials"])  # nothing lost, no error
    if seq["stopped"]:  # settled early: the rest skipped, never waited for
        assert seq["groups_completed"] < 40
    else:
        assert seq["groups_completed"] == 40 and len(answered) == 120
    assert record["prefetch"]["sent"] == srv.stats.endpoints["messages"] - 120  # the baseline's 120, then these


ROOT = Path(__file__).resolve().parent.parent
QA_KEY = ROOT / "fixtures" / "questions" / "FR-2024-02-12.jsonl"


def _qa(pytester: pytest.Pytester, model: str, name: str, data_dir: Path, samples: int, *args: str,
        ) -> tuple[int, dict[str, Any], str]:
    """The recipe's qa position cells (2,000 and 8,000 tokens: 48 cells) against the local server, cache on."""
    report = pytester.path / name
    result = pytester.runpytest_subprocess(
        str(ROOT / "evals" / "qa"), "-p", "no:cacheprovider", "-k", "test_qa_position", "--longctx-model",
        f"anthropic/{model}", "--longctx-report-dir", str(report), "--longctx-cache-dir",
        str(pytester.path / f"cache-{name}"), "--longctx-data-dir", str(data_dir), "--longctx-context-sizes",
        "2000,8000", "--longctx-samples", str(samples), "--longctx-max-concurrency", "32", *args, timeout=600)
    out = result.stdout.str() + result.stderr.str()
    path = report / "longctx.json"
    assert path.is_file() and "INTERNALERROR" not in out, out
    return int(result.ret), json.loads(path.read_text(encoding="utf-8")), out


@pytest.mark.e2e
@pytest.mark.parametrize("design", ["blocks", "full"])
def test_the_recipes_qa_cells_complete_over_sample_and_worker_counts(pytester: pytest.Pytester, api: Any,
                                                                     fr_xml: Path, design: str) -> None:
    """qa's position cells, each design: a baseline of 8 samples, then a candidate 3 points worse (the e-process
    cannot settle it early) gated sequentially at 8, 5 and 3 samples on 4, 2 and no xdist workers. Every run
    completes its design (or stops once settled), with no trial lost to an error, and decides."""
    api(Graded(f"claude-prod=0.85,claude-next=0.82,flip=0.05,seed=5,rho=0.7,qa-key={QA_KEY}"))
    design_args = ("--longctx-qa-design", design)
    code, prod, out = _qa(pytester, "claude-prod", "prod", fr_xml.parent, 8, "-n", "2", *design_args)
    assert code in (0, 1) and len(prod["trials"]) == 48 * 8, out
    gate = ("--longctx-compare", str(pytester.path / "prod" / "longctx.json"), "--longctx-threshold",
            "experiment=qa:max-drop=0", "--longctx-sequential", *design_args)
    for samples, dist in ((8, ("-n", "4")), (5, ("-n", "2")), (3, ("-p", "no:xdist"))):
        name = f"next-{samples}"
        code, run, out = _qa(pytester, "claude-next", name, fr_xml.parent, samples, *dist, *gate)
        seq = run["sequential"]
        assert code in (0, 10), out
        assert not run.get("stopped") and not [t for t in run["trials"] if t["outcome"] == "error"], out
        assert seq["groups_planned"] == samples
        assert seq["stopped"] or (seq["groups_completed"] == samples and len(run["trials"]) == 48 * samples), seq


# -- the window's parts, on plain values ------------------------------------------------------------------


def test_a_request_is_placed_at_its_sample_groups_first_test() -> None:
    ids = [f"t.py::test_x[{cell}-s{s}]" for s in range(3) for cell in ("a", "b", "c")]
    starts = group_starts(group_sizes(ids))
    assert starts == {0: 0, 1: 3, 2: 6}
    assert [place(i, n, starts) for n, i in enumerate(ids)] == [0, 0, 0, 3, 3, 3, 6, 6, 6]
    assert place("t.py::test_plain", 4, starts) == 4  # no sample index: its line in the plan
    assert place("", 2, {}) == 2  # groups not known yet: the line


def _entry(key: str, prefix: str | None = None, line: int = 0) -> PlannedRequest:
    text = (prefix or "") + f" question {key}"
    request = Request.user(text, cache_prefix=len(prefix) if prefix else 0)
    return PlannedRequest(key, request.to_json(), line)


@pytest.mark.asyncio
async def test_a_lane_takes_only_what_the_window_admits_and_a_wanted_request_first() -> None:
    queue = LaneQueue(lanes=2)
    queue.offer(_entry("lead", "context A " * 5, 0))
    for line, key in enumerate(["p1", "p2", "p3"], start=1):
        queue.offer(_entry(key, line=line))
    queue.offer(_entry("far", "context A " * 5, 9))  # the leader's sibling, far ahead in the plan
    queue.end_of_input()
    window, wanted = [2], set[str]()  # lines below window[0] may go out; keys tests wait for

    def inside(planned: PlannedRequest) -> bool:
        return planned.line < window[0]

    def get() -> Any:
        return queue.get(inside, lambda: wanted)

    first = await get()
    assert first.key == "lead"
    queue.done(first)  # "far" is released ahead of the rest, but the window does not admit it
    assert (await get()).key == "p1"
    waiting = asyncio.ensure_future(get())
    await asyncio.sleep(0)
    assert not waiting.done()  # nothing admitted: the lane waits, and holds nothing meanwhile
    wanted.add("p3")  # a test waits for p3: it goes out whatever the window says
    queue.nudge(inside, wanted)
    assert (await waiting).key == "p3"
    wanted.clear()
    waiting = asyncio.ensure_future(get())
    await asyncio.sleep(0)
    assert not waiting.done() and queue.holds("far") and queue.holds("p2") and not queue.holds("p3")
    window[0] = 3  # the tests reported: the window moves
    queue.nudge(inside, wanted)
    assert (await waiting).key == "p2"
    window[0] = 10
    assert (await get()).key == "far"
    assert await get() is None


@pytest.mark.asyncio
async def test_a_wanted_held_sibling_brings_its_leader() -> None:
    queue = LaneQueue(lanes=1)
    queue.offer(_entry("lead", "context B " * 5, 5))
    queue.offer(_entry("sib", "context B " * 5, 6))
    queue.offer(_entry("early"))
    queue.end_of_input()
    got = await queue.get(lambda planned: False, lambda: {"sib"})
    assert got is not None and got.key == "lead"  # the sibling waits for its prefix, its leader goes now


class _Shut:
    """A gate whose window admits nothing (it never looks, and nothing stops)."""

    def stopped(self) -> str | None:
        return None

    def inside(self, planned: PlannedRequest) -> bool:
        return False

    def looked(self) -> int:
        return -1

    def settled(self, trial: Trial) -> Settled | None:
        return None


class _Never:
    """A backend that never answers: whatever it is asked stays in flight."""

    provider, model = "anthropic", "claude-test"

    async def complete(self, request: Request) -> Any:
        await asyncio.Event().wait()

    async def aclose(self) -> None:
        pass


@pytest.mark.asyncio
async def test_a_request_nothing_will_deliver_ends_its_test_with_an_error_naming_it(tmp_path: Path) -> None:
    """A test waits for a key the dispatcher does not hold (a plan that disagrees with the run) while the
    dispatcher still holds another it may not send yet: once nothing is in flight and nothing starts, the waiting
    test gets an error naming the request, never a silent wait."""
    cache, work = ResponseCache(tmp_path / "cache"), tmp_path / "work"
    work.mkdir()
    other = {"key": "o" * 64, "request": _entry("o" * 64).request}
    (work / "plan.jsonl").write_text(json.dumps(other) + "\n", encoding="utf-8")
    # the window admits nothing: the dispatcher stays alive
    dispatcher = Dispatcher(_Never(), cache, work, work / "plan.jsonl", concurrency=2, policy=_Shut())
    dispatcher.start_streaming()
    dispatcher.plan_finished(ok=True)
    (work / "keys.txt").write_text("k" * 64 + "\n" + "o" * 64, encoding="utf-8")
    try:
        with pytest.raises(BackendError, match=r"a test waits for request k{12}, which the dispatcher cannot "
                                               r"deliver \(not among its requests; nothing in flight"):
            await Waiter(work, cache).wait("k" * 64)
        assert json.loads(error_path(work, "k" * 64).read_text())["fatal"] is False
        assert not (work / "done").exists()  # the dispatcher itself goes on
    finally:
        dispatcher.cancel("test over")
        dispatcher.join()

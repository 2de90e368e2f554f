"""The run's ledger (``dispatch/ledger.py``): debited before sending, in flight counted as spent, refused past the
budget, shared by processes and threads through one locked file."""

from __future__ import annotations

import multiprocessing
import threading
from pathlib import Path

import pytest

from pytest_longctx.backends.prices import Price, Rates
from pytest_longctx.dispatch.ledger import BudgetRefused, Ledger, as_usage, spent, totals

MODEL = "anthropic/claude-x"
PRICE = Price(MODEL, Rates.of_input(1000, 2000), (), "test")


def test_a_request_is_reserved_at_its_estimate_then_settled_to_its_usage(tmp_path: Path) -> None:
    ledger = Ledger.create(tmp_path / "run.ledger", 10.0, {MODEL: PRICE, "anthropic/unknown": None})
    ticket = ledger.reserve(MODEL, 300, 16)  # 300 x $1000/M + 16 x $2000/M = $0.332
    assert ticket.usd == pytest.approx(0.332)
    assert spent(ledger.read()) == pytest.approx(0.332)  # in flight counts as spent
    assert ledger.settle(ticket, 250, 4) == pytest.approx(0.258)
    state = ledger.read()
    assert state["in_flight"] == {} and spent(state) == pytest.approx(0.258)
    usage = as_usage(totals(state))
    assert (usage["calls"], usage["answered"]) == (1, 1)
    assert (usage["sent_input_tokens"], usage["paid_output_tokens"]) == (250, 4)
    cached = ledger.reserve(MODEL, 1000, 0, cache_write=True)  # a marked prefix: estimated at the write price
    assert cached.usd == pytest.approx(1.25)
    ledger.release(cached, failed=True)
    assert ledger.read()["models"][MODEL]["failed"] == 1 and spent(ledger.read()) == pytest.approx(0.258)
    assert ledger.reserve("anthropic/unknown", 10**6, 10**6).usd == 0.0  # unpriced: counted, at $0


def test_the_budget_refuses_a_request_it_cannot_cover_and_every_one_after(tmp_path: Path) -> None:
    ledger = Ledger.create(tmp_path / "run.ledger", 1.0, {MODEL: PRICE})
    first = ledger.reserve(MODEL, 300, 16)
    second = ledger.reserve(MODEL, 300, 16)
    ledger.reserve(MODEL, 300, 16)  # $0.996 in flight
    with pytest.raises(BudgetRefused, match=r"the budget is \$1.00; \$1.00 spent or in flight"):
        ledger.reserve(MODEL, 10, 1)
    ledger.settle(first, 10, 1)
    ledger.settle(second, 10, 1)  # money came back, but the run has stopped: nothing more goes out
    with pytest.raises(BudgetRefused):
        ledger.reserve(MODEL, 10, 1)
    state = ledger.read()
    assert state["models"][MODEL]["refused"] == 2 and state["models"][MODEL]["requests"] == 3
    assert ledger.stop_reason() is not None and ledger.stop_reason().startswith("--longctx-budget: ")  # type: ignore


def _spend(path: str, rounds: int, sent: list[int] | None = None) -> int:
    """A worker: reserve until refused, settling each at half its estimate; how many went out."""
    ledger = Ledger(Path(path))
    count = 0
    for _ in range(rounds):
        try:
            ticket = ledger.reserve(MODEL, 100, 10)  # $0.12 estimated, $0.06 settled
        except BudgetRefused:
            break
        count += 1
        ledger.settle(ticket, 50, 5)
    if sent is not None:
        sent.append(count)
    return count


def test_processes_and_threads_share_one_budget_and_never_pass_it(tmp_path: Path) -> None:
    path = tmp_path / "run.ledger"
    ledger = Ledger.create(path, 2.0, {MODEL: PRICE})
    with multiprocessing.get_context("spawn").Pool(2) as pool:  # two processes at once, within the budget
        assert pool.starmap(_spend, [(str(path), 10)] * 2) == [10, 10]
    assert ledger.read()["models"][MODEL]["requests"] == 20  # no count lost between processes
    sent: list[int] = []
    threads = [threading.Thread(target=_spend, args=(str(path), 200, sent)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    state = ledger.read()
    entry = state["models"][MODEL]
    assert entry["requests"] == entry["answered"] == 20 + sum(sent) and sum(sent) > 0
    assert spent(state) <= 2.0 and entry["usd"] == pytest.approx(entry["answered"] * 0.06)
    assert entry["refused"] == 3 and state["in_flight"] == {}  # each thread refused once, then stopped


def test_each_attempt_is_a_request_and_a_lost_answer_stays_spent(tmp_path: Path) -> None:
    ledger = Ledger.create(tmp_path / "run.ledger", 1.0, {MODEL: PRICE})
    ticket = ledger.reserve(MODEL, 300, 16)  # $0.332
    ledger.attempt_failed(ticket, "none", last=False)  # a 429: an error answer, billed nothing
    ledger.attempt_again(ticket)
    ledger.attempt_failed(ticket, "unsent", last=False)  # connection refused: the API never saw it
    ledger.attempt_again(ticket)
    ledger.attempt_failed(ticket, "unknown", last=False)  # a dropped connection: the API may have billed it
    assert spent(ledger.read()) == pytest.approx(2 * 0.332)  # its estimate spent, the reservation still held
    ledger.attempt_again(ticket)
    ledger.settle(ticket, 250, 4)
    usage = as_usage(totals(ledger.read()))
    assert (usage["calls"], usage["answered"], usage["failed"], usage["unread"]) == (3, 1, 2, 1)
    assert usage["usd"] == pytest.approx(0.258) and usage["abandoned_usd"] == pytest.approx(0.332)
    ledger.release(ticket)  # ended already: nothing more counted
    assert as_usage(totals(ledger.read()))["failed"] == 2


def test_a_retry_the_budget_no_longer_covers_is_refused_and_ends_the_request(tmp_path: Path) -> None:
    ledger = Ledger.create(tmp_path / "run.ledger", 0.5, {MODEL: PRICE})
    ticket = ledger.reserve(MODEL, 300, 16)  # $0.332 of $0.50
    ledger.attempt_failed(ticket, "none", last=False)
    ledger.attempt_again(ticket)  # an error answer cost nothing: the reservation still covers the retry
    ledger.attempt_failed(ticket, "unknown", last=False)  # $0.664 counted: another attempt could pass the budget
    with pytest.raises(BudgetRefused, match="a retry of a request to anthropic/claude-x would pass it"):
        ledger.attempt_again(ticket)
    state = ledger.read()
    assert state["in_flight"] == {} and spent(state) == pytest.approx(0.332)
    assert state["models"][MODEL]["requests"] == 2 and state["models"][MODEL]["refused"] == 1
    ledger.abandon(ticket)  # ended already: nothing abandoned
    assert state["models"][MODEL]["abandoned"] == ledger.read()["models"][MODEL]["abandoned"] == 0


def test_a_stop_between_two_attempts_abandons_nothing(tmp_path: Path) -> None:
    ledger = Ledger.create(tmp_path / "run.ledger", None, {MODEL: PRICE})
    ticket = ledger.reserve(MODEL, 300, 16)
    ledger.attempt_failed(ticket, "none", last=False)  # waiting to retry: nothing is out
    ledger.abandon(ticket)
    usage = as_usage(totals(ledger.read()))
    assert (usage["calls"], usage["failed"], usage["abandoned"], usage["abandoned_usd"]) == (1, 1, 0, 0.0)
    assert ledger.read()["in_flight"] == {}

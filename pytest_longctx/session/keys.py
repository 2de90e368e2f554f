"""Stash keys and the small state objects kept in ``config.stash`` (no module globals)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from pytest_longctx.dispatch.plan import PlanTally
from pytest_longctx.reporting.progress import Display
from pytest_longctx.results.aggregate import Aggregator
from pytest_longctx.results.power import PlanEvidence

if TYPE_CHECKING:
    from pytest_longctx.backends.model_spec import ModelSpec
    from pytest_longctx.dispatch.batch_rounds import BatchRounds
    from pytest_longctx.dispatch.prefetch import Dispatcher
    from pytest_longctx.run_settings import Settings
    from pytest_longctx.session.trial import Trial  # noqa: F401 - named in StashKey["Trial"] below


@dataclass
class Shared:
    """What every process (controller and workers) knows: how to reach shared services."""

    workers: int = 1
    local_url: str | None = None
    #: Work folder of the controller's prefetch/batch (planned keys, error files), if active.
    prefetch_dir: str | None = None
    #: Created by the controller when the run stops: workers send nothing after it (see ``stopping.py``).
    stop_file: str | None = None
    max_concurrency: int = 16
    seed: int = 0
    exact_tokens: bool = False
    #: ``--longctx-cache replay``: exact token counts come from their cache only (replay never sends).
    replay: bool = False
    cache_dir: str = ".longctx-cache"

    @classmethod
    def for_controller(cls, config: pytest.Config, settings: Settings) -> Shared:
        """The controller's: as many workers as xdist starts (1 without it); the rest is learned as services start."""
        numprocesses = getattr(config.option, "numprocesses", None) or 0
        dist = getattr(config.option, "dist", "no")
        workers = int(numprocesses) if isinstance(numprocesses, int) and dist != "no" else 1
        return cls(workers=max(1, workers), max_concurrency=settings.max_concurrency, seed=settings.seed,
                   exact_tokens=settings.exact_tokens, replay=settings.cache == "replay",
                   cache_dir=str(settings.cache_dir))

    @classmethod
    def for_worker(cls, workerinput: dict[str, Any], settings: Settings) -> Shared:
        """An xdist worker's: what the controller passed it (``XdistHooks.pytest_configure_node``)."""
        return cls(workers=int(workerinput.get("longctx_workers", 1)), local_url=workerinput.get("longctx_local_url"),
                   prefetch_dir=workerinput.get("longctx_prefetch_dir"),
                   stop_file=workerinput.get("longctx_stop_file"), max_concurrency=settings.max_concurrency,
                   seed=settings.seed, exact_tokens=settings.exact_tokens, cache_dir=str(settings.cache_dir),
                   replay=settings.cache == "replay")

    def share(self) -> int:
        """This process's fair share of the run's concurrency."""
        return max(1, self.max_concurrency // self.workers)

    def backend_options(self, spec: ModelSpec) -> dict[str, Any]:
        """Keyword arguments of ``spec``'s backend: the facts its provider takes (``Provider.options``), so
        every HTTP backend gets the same concurrency and retry seed."""
        from pytest_longctx.backends.registry import provider_of

        facts: dict[str, Any] = {"max_concurrency": self.share(), "seed": self.seed, "base_url": self.local_url,
                                 "exact_tokens": self.exact_tokens, "cache_dir": Path(self.cache_dir),
                                 "replay": self.replay}
        return {name: facts[name] for name in provider_of(spec).options}


class ModelServer(Protocol):
    """The local model server the controller started (``backends.start_model_server``): stopped at the end."""

    def stop(self) -> None: ...


class Batches(Protocol):
    """What ``--longctx-batch`` sent (``dispatch.batch.BatchRun``, or the sequential gate's rounds): for the record."""

    def to_json(self) -> dict[str, Any]: ...


class RunFacts(Protocol):
    """What a run record is built from (``run.build_record``): the run's state, or one model's share of it."""

    aggregator: Aggregator
    started: float
    stop_reason: str | None
    missing_data: list[dict[str, Any]]


@dataclass
class RunState:
    """Controller-only state of one run."""

    #: The run's terminal lines: start-up phases, then the progress line (``reporting.progress.Display``).
    display: Display
    aggregator: Aggregator = field(default_factory=Aggregator)
    #: Plan mode: what the planned requests add up to (they are counted as they arrive, not kept).
    plan: PlanTally = field(default_factory=PlanTally)
    #: --longctx-plan: what the planned trials would ask, per cell and item (for the plan's power statements)
    plan_evidence: PlanEvidence = field(default_factory=PlanEvidence)
    started: float = field(default_factory=time.time)
    record: dict[str, Any] | None = None
    stop_reason: str | None = None
    #: A usage error a fixture found (bad docs folder, QA file, missing corpus): exit 4, no record written.
    usage_error: str | None = None
    written: list[str] = field(default_factory=list)
    #: The local model server this run started (None: none, or one the user runs is shared).
    server: ModelServer | None = None
    #: The prefetch dispatcher sending the planned requests (None: no prefetch, or a batch).
    dispatcher: Dispatcher | None = None
    #: Work folder of prefetch/batch (planned keys, error files), removed when the run ends, however it ends.
    prefetch_work: Path | None = None
    services_started: bool = False
    notes: list[str] = field(default_factory=list)
    #: Lines the experiments add to the terminal summary (``pytest_longctx_summary_lines``), gathered at the finish.
    summary_lines: list[str] = field(default_factory=list)
    #: --longctx-batch: what the batches sent (the record's ``batch``).
    batch: Batches | None = None
    #: --longctx-sequential --longctx-batch: the rounds' thread (also ``batch``), finished before its folder goes.
    rounds: BatchRounds | None = None
    #: The longctx trials collected (not every test: ordinary tests beside them are not trials): the progress line's
    #: total.
    collected: int = 0
    #: The compared run's record (--longctx-compare), read and validated at start-up.
    baseline: dict[str, Any] | None = None
    #: Experiments skipped because their data is not here (``DataMissing.to_json``, merged by ``merge_missing``).
    missing_data: list[dict[str, Any]] = field(default_factory=list)


SETTINGS_KEY = pytest.StashKey["Settings"]()
SHARED_KEY = pytest.StashKey[Shared]()
RUN_KEY = pytest.StashKey[RunState]()
TRIAL_KEY = pytest.StashKey["Trial"]()
EMITTED_KEY = pytest.StashKey[bool]()
#: Set on ``metafunc.definition.stash`` by an experiment's ``pytest_generate_tests``: its own trials per cell
#: (e.g. the LRT source protocol's 50); the plugin parametrizes ``longctx_sample`` with it instead of --longctx-samples.
CELL_SAMPLES_KEY = pytest.StashKey[int]()

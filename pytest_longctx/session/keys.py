"""Stash keys and the small state objects kept in ``config.stash`` (no module globals)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_longctx.dispatch.plan import PlanTally
from pytest_longctx.results.aggregate import Aggregator
from pytest_longctx.results.power import PlanEvidence

if TYPE_CHECKING:
    from pytest_longctx.backends.model_spec import ModelSpec
    from pytest_longctx.run_settings import Settings  # noqa: F401 - named in StashKey["Settings"] below
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


@dataclass
class RunState:
    """Controller-only state of one run."""

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
    server: Any = None
    dispatcher: Any = None
    #: Work folder of prefetch/batch (planned keys, error files), removed when the run ends, however it ends.
    prefetch_work: Path | None = None
    services_started: bool = False
    notes: list[str] = field(default_factory=list)
    #: Lines the experiments add to the terminal summary (``pytest_longctx_summary_lines``), gathered at the finish.
    summary_lines: list[str] = field(default_factory=list)
    batch: Any = None
    collected: int = 0
    #: The compared run's record (--longctx-compare), read and validated at start-up.
    baseline: dict[str, Any] | None = None
    #: The run's terminal lines: start-up phases, then the progress line (``reporting.progress.Display``).
    display: Any = None
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

"""Fixtures that eval tests use: ``longctx`` (the trial), the shared model client, settings."""

from __future__ import annotations

import inspect
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from pytest_longctx.backends import build_backend
from pytest_longctx.backends.model_spec import ModelSpec
from pytest_longctx.backends.prompt_cache import caches_prompts
from pytest_longctx.dispatch.cache import ResponseCache
from pytest_longctx.dispatch.client import ModelClient
from pytest_longctx.dispatch.waiter import Waiter
from pytest_longctx.run_settings import Settings
from pytest_longctx.session.defaults import samples_for
from pytest_longctx.session.identity import SAMPLE_ARG as SAMPLE_ARG  # re-exported: the plugin parametrizes it
from pytest_longctx.session.identity import condition_params as condition_params
from pytest_longctx.session.identity import experiment_name, trial_identity
from pytest_longctx.session.keys import CELL_SAMPLES_KEY, SETTINGS_KEY, SHARED_KEY, TRIAL_KEY
from pytest_longctx.session.model_axis import MODEL_ARG, slug
from pytest_longctx.session.sequential_gate import gate_of
from pytest_longctx.session.trial import Trial, trial_seed


@pytest.fixture(scope="session")
def longctx_settings(pytestconfig: pytest.Config) -> Settings:
    """The run's resolved settings (model, seed, samples, ...)."""
    settings: Settings = pytestconfig.stash[SETTINGS_KEY]
    return settings


def make_client(config: pytest.Config, spec: ModelSpec, *, plan: bool | None = None) -> ModelClient:
    """A model client for ``spec`` with the run's cache, concurrency share and plan mode."""
    shared = config.stash[SHARED_KEY]
    s = config.stash[SETTINGS_KEY]
    window = s.context_window if spec == s.model else spec.profile.context_window
    backend = build_backend(spec, context_window=window, **shared.backend_options(spec))
    cache = ResponseCache(s.cache_dir) if s.cache != "off" else None
    waiter = None
    gate = gate_of(config)  # --longctx-sequential: the alarms settled so far (a trial only they cover is skipped)
    if shared.prefetch_dir and cache is not None and spec == s.model:

        # batch rounds: a later round's answer comes after the batches before it (hours), or the round's thread ends
        waiter = Waiter(Path(shared.prefetch_dir), cache, timeout_s=float("inf") if s.batch else 3600.0)
    return ModelClient(backend, cache, s.cache, shared.share(), s.plan if plan is None else plan,
                       plan_out=s.plan_out, waiter=waiter, plan_counts=not os.environ.get("LONGCTX_CHILD"),
                       stop_file=Path(shared.stop_file) if shared.stop_file else None,
                       prompt_cache=_prompt_cache(s, spec), settled=gate.settled_alarms() if gate else None)


def _prompt_cache(s: Settings, spec: ModelSpec) -> bool:
    """Whether requests to ``spec`` mark their shared prefix: each model under test by its own provider (the
    reference's as resolved; a judge that is no model under test never)."""
    if spec == s.model:
        return s.prompt_cache
    if spec not in s.models:
        return False
    return s.prompt_cache_mode == "on" or (s.prompt_cache_mode == "auto" and caches_prompts(spec.provider))


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def longctx_client(pytestconfig: pytest.Config, longctx_settings: Settings) -> AsyncIterator[ModelClient]:
    """One client for the model under test per worker process (cache, limiter, plan mode)."""
    client = make_client(pytestconfig, longctx_settings.model)
    yield client
    await client.backend.aclose()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def longctx_judge(pytestconfig: pytest.Config, longctx_settings: Settings,
                        longctx_client: ModelClient) -> AsyncIterator[ModelClient]:
    """The judge model's client (--longctx-judge; the model under test when not set)."""
    if longctx_settings.judge == longctx_settings.model:
        yield longctx_client
        return
    client = make_client(pytestconfig, longctx_settings.judge)
    yield client
    await client.backend.aclose()


@pytest.fixture
def longctx_sample() -> int:
    """Index of the trial within its cell (parametrized by the plugin from --longctx-samples)."""
    return 0


@pytest.fixture
def longctx_model(longctx_settings: Settings) -> str:
    """The model the trial asks: the one model, or (several --longctx-model) each in turn, parametrized by the
    plugin."""
    return longctx_settings.model.spec


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def longctx_clients(pytestconfig: pytest.Config, longctx_settings: Settings,
                          longctx_client: ModelClient) -> AsyncIterator[dict[str, ModelClient]]:
    """Several --longctx-model: one client per model in this worker process, made when first asked (the
    reference's is ``longctx_client``)."""
    clients = {longctx_settings.model.spec: longctx_client}
    yield clients
    for spec, client in clients.items():
        if spec != longctx_settings.model.spec:
            await client.backend.aclose()


def _client_of(config: pytest.Config, settings: Settings, model: str, clients: dict[str, ModelClient]) -> ModelClient:
    """The trial's model's client (made the first time this process asks it)."""
    if model not in clients:
        spec = next(m for m in settings.models if m.spec == model)
        clients[model] = make_client(config, spec)
    return clients[model]


@pytest.fixture
def longctx(request: pytest.FixtureRequest, longctx_client: ModelClient, longctx_settings: Settings,
            longctx_sample: int, longctx_model: str, longctx_clients: dict[str, ModelClient]) -> Trial:
    """The current trial: seeded RNG, ``await longctx.ask(...)``, ``longctx.record(...)``."""
    item = request.node
    identity = trial_identity(item)
    experiment, params = identity["experiment"], identity["params"]
    seed = trial_seed(longctx_settings.seed, experiment, params, longctx_sample)  # the same for every model
    client = _client_of(request.config, longctx_settings, longctx_model, longctx_clients)
    trial = Trial(experiment=experiment, params=params, sample=longctx_sample, seed=seed,
                  client=client, nodeid=item.nodeid, run_seed=longctx_settings.seed,
                  model_key=identity.get("model"))
    item.stash[TRIAL_KEY] = trial
    return trial



def parametrize(metafunc: pytest.Metafunc) -> None:
    """A longctx test's trials: each model (several --longctx-model, in the order given: the same on every worker),
    each sample (``CELL_SAMPLES_KEY`` an experiment set, else its --longctx-samples); an async test runs on the
    session's one event loop, so clients never outlive their loop."""
    settings = metafunc.config.stash[SETTINGS_KEY]
    if settings.several and MODEL_ARG in metafunc.fixturenames:
        metafunc.parametrize(MODEL_ARG, [m.spec for m in settings.models], ids=[slug(m.spec) for m in settings.models])
    if SAMPLE_ARG in metafunc.fixturenames:
        samples = metafunc.definition.stash.get(CELL_SAMPLES_KEY, None)
        if samples is None:
            samples = samples_for(metafunc.config, experiment_name(metafunc.definition))
        metafunc.parametrize(SAMPLE_ARG, list(range(samples)), ids=[f"s{i}" for i in range(samples)])
    func = metafunc.function
    if inspect.iscoroutinefunction(func) and not any(
        getattr(m, "name", "") == "asyncio" for m in getattr(func, "pytestmark", [])
    ):
        pytest.mark.asyncio(loop_scope="session")(func)

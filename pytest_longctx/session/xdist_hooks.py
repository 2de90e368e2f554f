"""The controller's hooks that exist only when pytest-xdist is installed (registered only then: an unknown hook
would be refused without it)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_longctx.backends import provider_of
from pytest_longctx.dispatch.ordering import sample_of_nodeid
from pytest_longctx.session.keys import RUN_KEY, SETTINGS_KEY, SHARED_KEY
from pytest_longctx.session.sequential_gate import gate_of
from pytest_longctx.session.services import ModelServices


class XdistHooks:
    """The controller does not collect under xdist: the shared services start before the workers, the sample
    groups come from the first worker's collection, and each worker learns how to reach the services."""

    def __init__(self, config: pytest.Config, services: ModelServices | None) -> None:
        self.config = config
        self.services = services

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_setupnodes(self) -> None:
        if self.services is None:  # --collect-only, --help: no model is used
            return
        self.services.start()
        if not provider_of(self.config.stash[SETTINGS_KEY].model).in_process:
            workers = self.config.stash[SHARED_KEY].workers
            self.config.stash[RUN_KEY].display.say(f"{workers} workers start, collect the experiments and build "
                                                   "their conditions (files, contexts, question sets) ...")

    def pytest_xdist_node_collection_finished(self, ids: list[str]) -> None:
        """A worker's collection (each collects the same) gives the longctx trials the progress line counts (those
        with a sample index, as the plugin parametrizes every trial) and, with --longctx-sequential, the sample
        groups (the first worker's)."""
        self.config.stash[RUN_KEY].collected = sum(1 for nodeid in ids if sample_of_nodeid(nodeid) is not None)
        if (gate := gate_of(self.config)) is not None:
            gate.set_groups(list(ids))

    def pytest_configure_node(self, node: Any) -> None:
        shared = self.config.stash[SHARED_KEY]
        node.workerinput["longctx_workers"] = shared.workers
        node.workerinput["longctx_local_url"] = shared.local_url
        node.workerinput["longctx_prefetch_dir"] = shared.prefetch_dir
        node.workerinput["longctx_stop_file"] = shared.stop_file

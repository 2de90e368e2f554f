"""What every experiment under evals/ shares: a terminal without lines nobody running an eval can act on.

setup.sh installs test tools for the plugin's own tests that evals/ does not use: syrupy (snapshots), whose xdist
bookkeeping prints "received 0 of 8 xdist worker snapshot reports" and "Unused snapshot detection is disabled"
whenever workers stop early, and pytest-benchmark, which adds a header line of its defaults. A run of evals/
alone goes without them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
#: pytest11 names of the plugins evals/ does not use.
UNUSED = ("syrupy", "benchmark")


def pytest_configure(config: pytest.Config) -> None:
    base = Path(str(config.invocation_params.dir))
    paths = [(base / str(arg).split("::")[0]).resolve() for arg in config.args]
    if not paths or not all(p == HERE or HERE in p.parents for p in paths):
        return  # evals/ beside other tests (e.g. `pytest evals tests`): those may use them
    for name in UNUSED:
        plugin = config.pluginmanager.get_plugin(name)
        if plugin is not None:
            config.pluginmanager.unregister(plugin)

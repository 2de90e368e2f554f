"""The heap a run builds before its first test, kept out of Python's full garbage collections (``gc.freeze``).

Imports, collected items and session fixtures live until the run ends. Every full (generation 2) collection
walks all of them again: a handful during the run, then pytest's own five at exit (its unraisable-exception
check), in every process (controller, plan child, each xdist worker). That was 0.2-0.3 CPU s a process on the LRT
sweep. Freezing after start-up and again after collection moves what is alive then to the permanent generation,
which collections skip; reference counting still frees it as usual, only reference cycles wait for the thaw.

The thaw (``gc.unfreeze``) runs as the last clean-up of the run, after pytest's exit collections, so a run inside
another process (pytester) leaves that process's collector as it found it. A process that froze its own heap
before the run (``gc.get_freeze_count() > 0``) is left alone. ``--longctx-gc-freeze off`` turns it off.
"""

from __future__ import annotations

import gc

import pytest

from pytest_longctx.session.keys import SETTINGS_KEY

#: Set once this run has frozen the heap (then it also thaws it).
FROZEN_KEY = pytest.StashKey[bool]()


def freeze(config: pytest.Config) -> None:
    """Freeze what is alive now (unless --longctx-gc-freeze is off); the first call in a run also schedules the
    thaw at the run's very end."""
    if not config.stash[SETTINGS_KEY].gc_freeze:
        return
    if config.stash.get(FROZEN_KEY, False):
        gc.freeze()  # this run's own earlier freeze: add what collection built since
        return
    if gc.get_freeze_count():  # frozen by someone else (the host process, an outer run): theirs to manage
        return
    config.stash[FROZEN_KEY] = True
    config.add_cleanup(gc.unfreeze)
    gc.freeze()

"""Exception types shared by the plugin's modules."""

from __future__ import annotations


class LongctxError(Exception):
    """Base class of the plugin's own errors."""


class UsageError(LongctxError):
    """Bad input from the user (option, file): reported as one line, never a traceback."""


class BackendError(LongctxError):
    """A model call failed after retries: the trial is an error, never a wrong answer."""


class FatalBackendError(BackendError):
    """A failure that no retry can fix (auth, spend limit): the whole run stops."""


class NotCachedError(BackendError):
    """Replay mode: the response for this request is not in the cache."""

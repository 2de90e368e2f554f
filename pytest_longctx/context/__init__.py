"""Building contexts, for any experiment: :mod:`.haystack` fills a token budget and places a gold unit."""

from __future__ import annotations

from pytest_longctx.context.haystack import (
    Haystack,
    Unit,
    at_depth,
    fill,
    nearest_index,
    place,
    render,
    starts,
)

__all__ = ["Haystack", "Unit", "at_depth", "fill", "nearest_index", "place", "render", "starts"]

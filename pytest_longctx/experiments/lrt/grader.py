"""The LRT's grader for the local test server (``pytest_longctx_graders``): ``[EXECUTE THIS]: Go to line k``; right:
line k's value; wrong: a neighbouring line's (k-1 or k+1, or the nearest line holding another value). Item: a digest
of the prompt (each trial draws its own file)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from typing import Any

from pytest_longctx.util.grading import pick, task

_ASK = re.compile(r"\[EXECUTE THIS\]: Go to line (\d+) and report only REGISTER_CONTENT")


def _grade(prompt: str) -> Mapping[str, Any] | None:
    asked = _ASK.search(prompt)
    if asked is None:
        return None
    target = int(asked.group(1))

    def value(line: int) -> str | None:
        found = re.search(rf"^line {line}: REGISTER_CONTENT is <(-?\d+)>$", prompt, re.M)
        return found.group(1) if found else None

    right = value(target)
    if right is None:
        raise ValueError(f"graded: an LRT prompt asks line {target}, which it does not hold")
    near = [v for v in (value(target - 1), value(target + 1)) if v is not None and v != right]
    if not near:  # both neighbours missing or holding the same value (the source protocol repeats values)
        lines = {int(k): v for k, v in re.findall(r"^line (\d+): REGISTER_CONTENT is <(-?\d+)>$", prompt, re.M)}
        others = sorted((abs(k - target), k) for k, v in lines.items() if v != right)
        if not others:
            raise ValueError(f"graded: an LRT prompt whose every line holds {right}: no wrong answer")
        near = [lines[others[0][1]]]
    item = hashlib.sha256(prompt.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return task("lrt", f"lrt-{item}", right, pick(prompt, near))


def make_grader() -> Callable[[str], Mapping[str, Any] | None]:
    return _grade

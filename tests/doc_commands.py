"""The commands README.md and docs/*.md show: fenced shell blocks, a CI workflow's ``run:`` steps, and inline code
that starts with one of the project's programs. Used by the tests that keep them runnable."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: How a command may start when it is written inline in prose (fenced shell blocks hold nothing else).
INLINE = ("pytest ", ".venv/bin/pytest ", "longctx-", ".venv/bin/longctx-", "python -m pytest_longctx",
          "bash setup.sh")
_ENV = re.compile(r"[A-Z_][A-Z0-9_]*=\S*")
_FENCE = re.compile(r"^```(\w*)\s*$")
_SPAN = re.compile(r"`([^`\n]+)`")


@dataclass(frozen=True)
class Command:
    """One command as written: where, the words after its environment assignments, and those assignments."""

    where: str
    text: str
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict, hash=False)

    @property
    def program(self) -> str:
        """``pytest``, ``longctx-data``, ... with a ``.venv/bin/`` or ``python -m`` prefix taken off."""
        first = self.argv[0].removeprefix(".venv/bin/")
        if first in ("python", "python3") and self.argv[1:2] == ("-m",):
            return self.argv[2]
        if first in ("python", "python3", "bash"):
            return self.argv[1]
        return first

    @property
    def args(self) -> list[str]:
        """The words after the program."""
        first = self.argv[0].removeprefix(".venv/bin/")
        skip = 3 if first in ("python", "python3") and self.argv[1:2] == ("-m",) else 2 if first in (
            "python", "python3", "bash") else 1
        return list(self.argv[skip:])


def _split(where: str, line: str) -> list[Command]:
    """``A=1 cmd args && cmd2 # comment`` -> its commands."""
    try:
        words = shlex.split(line, comments=True)
    except ValueError:  # a line that is no command (unbalanced quotes in prose)
        return []
    out: list[Command] = []
    while words:
        part, words = (words[:words.index("&&")], words[words.index("&&") + 1:]) if "&&" in words else (words, [])
        if part and part[-1] == "&":  # started in the background: the command itself is what is checked
            part = part[:-1]
        env = {}
        while part and _ENV.fullmatch(part[0]):
            name, _, value = part.pop(0).partition("=")
            env[name] = value
        if part:
            out.append(Command(where, " ".join(part), tuple(part), env))
    return out


def commands(page: Path) -> list[Command]:
    """Every command ``page`` shows."""
    lines = page.read_text(encoding="utf-8").splitlines()
    rel = page.relative_to(ROOT).as_posix()
    found: list[Command] = []
    fence: str | None = None
    folded: list[str] | None = None
    continued: tuple[str, str] | None = None  # a shell line ending in a backslash: (where it began, its text)
    for number, line in enumerate(lines, 1):
        where = f"{rel}:{number}"
        match = _FENCE.match(line.strip())
        if match:
            fence = None if fence is not None else match.group(1) or "text"
            continue
        if fence in ("bash", "sh", "shell", "console"):
            if continued is not None:
                where, line = continued[0], continued[1] + " " + line.strip()
                continued = None
            if line.rstrip().endswith("\\"):
                continued = (where, line.rstrip()[:-1].rstrip())
                continue
            found += _split(where, line)
        elif fence == "yaml":
            stripped = line.strip()
            if folded is not None:
                if stripped and not stripped.startswith(("- ", "env:")):
                    folded.append(stripped)
                    continue
                found += _split(where, " ".join(folded))
                folded = None
            if stripped.startswith(("run: >", "- run: >")):
                folded = []
            elif stripped.startswith(("run: ", "- run: ")):
                found += _split(where, stripped.split("run: ", 1)[1])
        elif fence is None:
            for span in _SPAN.findall(line):
                if span.startswith(INLINE) and " " in span.strip():  # a program and its arguments
                    found += _split(where, span)
    return found


def all_commands() -> list[Command]:
    return [c for page in PAGES for c in commands(page)]

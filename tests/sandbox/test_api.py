"""The sandbox API: argument checking, result objects, the local backend's own options."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import gymnasium
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import llmgym.error
from llmgym.sandbox import (
    ExecResult,
    InvalidLimits,
    InvalidRunRequest,
    Limits,
    Sandbox,
    SandboxError,
    UnknownBackend,
    UnknownLanguage,
    get_sandbox,
)

from .conftest import FAST


@pytest.mark.parametrize(
    "kwargs",
    [
        {"wall_time_s": -1},
        {"wall_time_s": 0},
        {"wall_time_s": float("nan")},
        {"cpu_time_s": 0},
        {"memory_mb": 0},
        {"memory_mb": 1.5},
        {"max_processes": 0},
        {"max_output_bytes": -1},
        {"network": "yes"},
        {"wall_time_s": True},
    ],
)
def test_bad_limits_are_rejected(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidLimits) as info:
        Limits(**kwargs)  # type: ignore[arg-type]
    assert isinstance(info.value, SandboxError) and isinstance(info.value, gymnasium.error.Error)
    assert isinstance(info.value, llmgym.error.Error)  # one error root for all of llmgym
    assert next(iter(kwargs)) in str(info.value)


def test_limits_round_trip_and_frozen() -> None:
    lim = Limits(wall_time_s=2, memory_mb=64)
    assert Limits(**lim.to_dict()) == lim
    assert lim.cpu_limit_s == 2
    with pytest.raises(AttributeError):
        lim.memory_mb = 1  # type: ignore[misc]
    with pytest.raises(InvalidLimits, match="unknown Limits field"):
        Limits.coerce({"wall": 1})


def test_bad_run_arguments(local_sandbox: Sandbox) -> None:
    sb = local_sandbox
    with pytest.raises(InvalidRunRequest, match="not both"):
        sb.run(code="1", command="true")
    with pytest.raises(InvalidRunRequest, match="needs code"):
        sb.run()
    with pytest.raises(InvalidRunRequest, match="code expects a str"):
        sb.run(code=b"print(1)")  # type: ignore[arg-type]
    with pytest.raises(UnknownLanguage, match="cobol"):
        sb.run(code="x", language="cobol")
    with pytest.raises(InvalidRunRequest, match="inside /tmp"):
        sb.run(code="1", files={"../etc/passwd": "x"})
    with pytest.raises(InvalidRunRequest, match="relative path"):
        sb.run(code="1", files={"/etc/passwd": "x"})
    with pytest.raises(InvalidRunRequest, match="collides"):
        sb.run(code="1", files={"main.py": "x"})
    with pytest.raises(InvalidLimits):
        sb.run(code="1", limits={"memory_mb": -5})
    with pytest.raises(InvalidRunRequest, match="item 1"):
        sb.run_many([{"code": "1"}, {"code": "1", "oops": 2}])
    with pytest.raises(UnknownBackend):
        get_sandbox("nope")


def test_exec_result_dict_round_trip() -> None:
    res = ExecResult(
        status="runtime_error",
        exit_code=None,
        signal=11,
        stdout="a",
        stderr="b",
        wall_time_s=0.1,
        cpu_time_s=0.05,
        peak_memory_mb=3.0,
        result_bytes=b"\x00\xff",
        stdout_bytes=b"a",
        stderr_bytes=b"b",
    )
    assert ExecResult.from_dict(res.to_dict()) == res
    assert res.signal_name == "SIGSEGV" and not res.ok and not res.truncated
    import json

    json.dumps(res.to_dict())


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=4096))
def test_arbitrary_bytes_round_trip_through_stdout(local_sandbox: Sandbox, data: bytes) -> None:
    res = local_sandbox.run(
        code="import sys; sys.stdout.buffer.write(sys.stdin.buffer.read())", stdin=data, limits=FAST
    )
    assert res.ok, res
    assert res.stdout_bytes == data
    assert res.stdout == data.decode("utf-8", "replace")


def test_fresh_interpreter_path_matches_fast_path() -> None:
    with get_sandbox("local", fast_path=False) as fresh:
        ok = fresh.run(code="import sys; print(__name__, sys.argv)", limits=FAST)
        assert ok.stdout == "__main__ ['/tmp/main.py']\n", ok
        bad = fresh.run(code="print(", limits=FAST)
        assert bad.status == "compile_error" and "SyntaxError" in bad.compile_output
        crash = fresh.run(code="raise KeyError(1)", limits=FAST)
        assert crash.exit_code == 1 and "KeyError: 1" in crash.stderr


def test_interpreter_and_paths_below_tmp_stay_visible_to_runs(tmp_path) -> None:
    """Every run gets a fresh /tmp; a virtual environment or an ro_path below the host's /tmp
    must still be there, read-only, for both Python paths."""
    assert str(tmp_path).startswith("/tmp/")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    data = tmp_path / "data"
    data.mkdir()
    (data / "facts.txt").write_text("kept\n")
    probe = (
        "import sys, pathlib\n"
        f"print(sys.prefix, pathlib.Path({str(data / 'facts.txt')!r}).read_text(), end='')\n"
        "import os; print(sorted(os.listdir('/tmp')))\n"
        f"try:\n    open({str(data / 'new.txt')!r}, 'w')\n"
        "except OSError as exc:\n    print(exc.strerror)\n"
    )
    for fast_path in (False, True):
        with get_sandbox(
            "local", python=str(venv / "bin" / "python"), fast_path=fast_path, ro_paths=[data]
        ) as sb:
            res = sb.run(code=probe, limits=FAST)
            assert res.ok, res
            first, listing, error = res.stdout.splitlines()
            prefix, kept = first.split(" ")
            assert prefix == str(venv)
            assert kept == "kept"
            shown = _host_names_in_tmp() | {tmp_path.parts[2]}
            assert listing == str(sorted({"main.py"} | shown))
            assert error == "Read-only file system"
            again = sb.run(code="import os; print(sorted(os.listdir('/tmp')))", limits=FAST)
            assert again.stdout == f"{listing}\n", "state left behind"
    assert sorted(p.name for p in data.iterdir()) == ["facts.txt"]


def test_network_opt_in_reaches_host_loopback(local_sandbox: Sandbox) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    accepted: list[bytes] = []

    def serve() -> None:
        server.settimeout(10)
        try:
            conn, _ = server.accept()
            accepted.append(conn.recv(16))
            conn.close()
        except OSError:
            pass

    t = threading.Thread(target=serve)
    t.start()
    res = local_sandbox.run(
        code=f"import socket; s=socket.create_connection(('127.0.0.1', {port}), 5); s.sendall(b'hi')",
        limits=FAST.replace(network=True),
    )
    t.join()
    server.close()
    assert res.ok, res
    assert accepted == [b"hi"]


def test_isolation_report(local_sandbox: Sandbox) -> None:
    info = local_sandbox.isolation()
    assert info["backend"] == "local"
    assert {"pid", "mount", "net", "ipc"} <= set(info["namespaces"])
    if os.geteuid() == 0:
        assert info["cgroups"].startswith("v"), info
        assert info["degraded"] == [] or all("seccomp" in d for d in info["degraded"])


def test_concurrent_runs_do_not_see_each_other(local_sandbox: Sandbox) -> None:
    # Two runs at once: the listener must not be reachable from the other run (no shared
    # loopback, no shared abstract unix socket namespace).
    listener = """
import socket, time
s = socket.socket(socket.AF_UNIX); s.bind("\\0llmgym-test"); s.listen(1)
t = socket.socket(); t.bind(("127.0.0.1", 45678)) if False else None
time.sleep(1.5)
print("listened")
"""
    client = """
import socket, time
time.sleep(0.5)
try:
    socket.socket(socket.AF_UNIX).connect("\\0llmgym-test"); print("REACHED")
except OSError as e:
    print("isolated", e.errno)
"""
    a, b = local_sandbox.run_many(
        [{"code": listener, "limits": FAST}, {"code": client, "limits": FAST}], concurrency=2
    )
    assert a.stdout == "listened\n", a
    assert b.stdout.startswith("isolated"), b


def _host_names_in_tmp() -> set[str]:
    """Top-level names in every run's /tmp that a host install below /tmp puts there."""
    return {Path(p).parts[2] for p in (sys.prefix, sys.base_prefix) if p.startswith("/tmp/")}


def test_preloaded_sources_are_warm_in_every_run_and_not_shared_between_runs() -> None:
    source = "import json\nCOUNT = [0]\ndef bump():\n    COUNT[0] += 1\n    return COUNT[0]\n"
    with get_sandbox("local", preload_sources={"llmgym_test_mod": source}) as sb:
        assert sb.preloaded == frozenset({"llmgym_test_mod"})  # type: ignore[attr-defined]
        code = (
            "import os, sys\n"
            "m = sys.modules['llmgym_test_mod']\n"  # there before the program imports it
            "import llmgym_test_mod\n"
            "print(m is llmgym_test_mod, m.bump(), m.bump(), sorted(set(os.listdir('/tmp')) - HOST))\n"
        ).replace("HOST", repr(_host_names_in_tmp()))
        first, second = sb.run(code=code, limits=FAST), sb.run(code=code, limits=FAST)
        # Each run starts from the zygote's copy: what a run changes stays in that run.
        assert first.stdout == second.stdout == "True 1 2 ['main.py']\n", (first, second)


def test_preloaded_sources_are_checked() -> None:
    with pytest.raises(InvalidRunRequest, match="dotted module names"):
        get_sandbox("local", preload_sources={"not-a-name": "x = 1"})
    with pytest.raises(InvalidRunRequest, match="expects Python source"):
        get_sandbox("local", preload_sources={"mod": b"x = 1"})
    from llmgym.sandbox import BackendUnavailable

    with pytest.raises(BackendUnavailable, match="'broken'.*ZeroDivisionError"):
        get_sandbox("local", preload_sources={"broken": "1 / 0"})


def test_closed_sandbox_refuses_runs() -> None:
    from llmgym.sandbox import SandboxClosed

    sb = get_sandbox("local")
    sb.close()
    sb.close()
    with pytest.raises(SandboxClosed):
        sb.run(code="1")


def test_forked_python_init_keeps_the_guarantees(monkeypatch: pytest.MonkeyPatch) -> None:
    # Where no `sleep` can be spawned as a run's init, the zygote forks a Python one instead.
    from llmgym.sandbox import local

    from .test_hostile import ORPHANS

    monkeypatch.setattr(local, "INIT_SPAWNER", False)
    with get_sandbox("local") as sb:
        who = sb.run(code="import os; print(os.getpid(), open('/proc/1/comm').read())")
        assert who.stdout == "2 llmgym-init\n\n", who  # the program is pid 2; the init, Python
        reaped = sb.run(code=ORPHANS, limits=FAST.replace(wall_time_s=30, max_processes=16))
        assert reaped.stdout == "zombies 0\n", reaped
        killer = sb.run(
            code="import os, signal\nfor t in (1, -1):\n    try: os.kill(t, 9)\n    except OSError: pass\nprint('alive')",
            limits=FAST,
        )
        assert killer.stdout == "alive\n", killer
        daemon = sb.run(
            code="import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\nprint('bye')",
            limits=FAST,
        )
        assert daemon.ok and daemon.wall_time_s < 5, daemon
        assert sb.run(code="print(6 * 7)", limits=FAST).stdout == "42\n"


def test_docker_containers_go_with_a_dead_owner(docker_sandbox: Sandbox) -> None:
    # A process that dies without close() leaves no container (running or stopped) behind.
    import subprocess
    import sys
    import time

    import docker

    script = (
        "import os\nfrom llmgym.sandbox import get_sandbox\n"
        "sb = get_sandbox('docker', pool_size=1)\n"
        "print(os.getpid(), sb.run(code='print(1)').stdout.strip(), flush=True)\nos._exit(1)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    pid, ran = out.stdout.split()
    assert ran == "1", out.stderr
    client = docker.from_env(timeout=30)
    try:
        deadline = time.monotonic() + 30
        left = ["?"]
        while left and time.monotonic() < deadline:
            left = client.containers.list(all=True, filters={"label": f"llmgym.sandbox={pid}"})
            time.sleep(0.2)
        assert not left, left
    finally:
        client.close()


def test_run_cgroups_of_a_dead_sandbox_are_swept() -> None:
    # A sandbox process killed mid-run leaves its run cgroups: the next manager removes them,
    # but not those of a live process, nor those made in another pid namespace.
    import subprocess

    from llmgym.sandbox._cgroup import CgroupManager

    first = CgroupManager()
    if not first.available:
        pytest.skip(f"no cgroups here: {first.reason}")
    dead = subprocess.Popen(["true"])
    dead.wait()
    ns = os.stat("/proc/self/ns/pid").st_ino
    bases = list(first._bases.values())
    stale = [os.path.join(b, f"r{dead.pid}@{ns}-0") for b in bases]
    kept = [os.path.join(b, f"r{dead.pid}@{ns + 1}-0") for b in bases]
    kept += [os.path.join(b, f"r{os.getpid()}@{ns}-999") for b in bases]
    for path in stale + kept:
        os.mkdir(path)
    try:
        second = CgroupManager()
        assert second.available
        assert [p for p in stale if os.path.exists(p)] == []
        assert all(os.path.exists(p) for p in kept)
        second.close()
    finally:
        for path in stale + kept:
            if os.path.exists(path):
                os.rmdir(path)
        first.close()


def test_run_cgroups_are_fresh_for_every_run_and_all_removed_at_close() -> None:
    from llmgym.sandbox._cgroup import CgroupManager, settled_everywhere

    from .conftest import _own_run_cgroups

    managers = [CgroupManager(), CgroupManager()]  # two sandboxes of one process
    if not managers[0].available:
        for m in managers:
            m.close()
        pytest.skip(f"no cgroups here: {managers[0].reason}")
    given = []
    for _ in range(6):
        for m in managers:
            run = m.create(64, 8)
            given.append(tuple(run.dirs.values()))
            m.retire(run)
    assert len(set(given)) == len(given)  # never the same cgroup twice, across managers too
    for m in managers:
        ahead = m.settled()  # the spent ones are gone; the next ones wait, unused
        assert 0 < len(ahead) <= m.READY * len(m._bases)
        assert not set(ahead) & {d for dirs in given for d in dirs}
    mine = {d for dirs in given for d in dirs} | {d for m in managers for d in m.settled()}
    for m in managers:
        m.close()
    ahead = set(settled_everywhere())  # what other live sandboxes made ahead, settled
    left = set(_own_run_cgroups())
    assert not left & mine  # closed: nothing of theirs is left
    assert left == ahead


def test_the_readme_snippet_exits_promptly_without_close(docker_sandbox: Sandbox) -> None:
    """The README's sandbox snippet with "docker" and no close(): the interpreter exits
    promptly (it once hung 14 minutes), leaving no container and no /tmp/llmgym-docker-* folder;
    ``with get_sandbox(...)`` closes as well."""
    import glob
    import subprocess
    import sys
    import time

    import docker

    before = set(glob.glob("/tmp/llmgym-docker-*"))
    for body in (
        "sb = get_sandbox('docker')\nprint(sb.run(code='print(1)').stdout.strip())\n",
        "with get_sandbox('docker') as sb:\n    print(sb.run(code='print(1)').stdout.strip())\n",
        "sb = get_sandbox('docker')\nprint(sb.run(code='print(1)').stdout.strip())\n"
        "raise SystemExit(3)\n",
    ):
        script = f"import os\nfrom llmgym.sandbox import get_sandbox\nprint(os.getpid())\n{body}"
        start = time.monotonic()
        out = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
        )
        took = time.monotonic() - start
        pid, ran = out.stdout.split()[:2]
        assert ran == "1" and out.returncode in (0, 3), out.stderr[-2000:]
        assert took < 60, took
        client = docker.from_env(timeout=30)
        try:
            left = client.containers.list(all=True, filters={"label": f"llmgym.sandbox={pid}"})
        finally:
            client.close()
        assert not left, left
    assert set(glob.glob("/tmp/llmgym-docker-*")) <= before

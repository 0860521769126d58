"""Hostile programs, one property each, against every backend (local and docker).

Timing bounds are generous on purpose: these tests share two cores with the rest of the suite.
What must hold exactly (status, exit code, signal, what is visible) is asserted exactly.
"""

from __future__ import annotations

import os
import socket
import textwrap
import time

import pytest

from llmgym.sandbox import Limits, Sandbox

from .conftest import FAST

SHORT = Limits(wall_time_s=1.5, memory_mb=128, max_processes=32)


def run(sb: Sandbox, code: str, limits: Limits = FAST, **kw: object):  # type: ignore[no-untyped-def]
    return sb.run(code=textwrap.dedent(code), limits=limits, **kw)  # type: ignore[arg-type]


# -- resources ------------------------------------------------------------------------------


def test_fork_bomb_is_contained(sandbox: Sandbox) -> None:
    t = time.monotonic()
    res = run(
        sandbox,
        """
        import os
        while True:
            try:
                os.fork()
            except OSError:
                pass
        """,
        SHORT,
    )
    assert res.status == "timeout", res
    assert time.monotonic() - t < 20
    assert sandbox.run(code="print('alive')", limits=FAST).stdout == "alive\n"


def test_memory_bomb_hits_memory_limit(sandbox: Sandbox) -> None:
    res = run(
        sandbox,
        """
        chunks = []
        while True:
            chunks.append(bytearray(16 << 20))
            for i in range(0, 16 << 20, 4096):
                chunks[-1][i] = 1
        """,
        Limits(wall_time_s=10, memory_mb=96),
    )
    assert res.status == "memory_limit", res
    assert res.peak_memory_mb <= 96 * 1.35


def test_cpu_loop_hits_cpu_limit(sandbox: Sandbox) -> None:
    res = run(sandbox, "while True: pass", Limits(wall_time_s=20, cpu_time_s=1))
    assert res.status == "timeout", res
    assert "CPU" in res.detail
    assert 0.8 <= res.cpu_time_s <= 3.0


def test_sleep_past_wall_limit(sandbox: Sandbox) -> None:
    res = run(sandbox, "import time; time.sleep(60)", Limits(wall_time_s=1))
    assert res.status == "timeout", res
    assert "wall" in res.detail
    assert res.signal == 9
    assert 0.9 <= res.wall_time_s < 10
    assert res.cpu_time_s < 0.5


def test_cpu_starvation_does_not_count_against_the_wall_limit(sandbox: Sandbox) -> None:
    # Pinned to one CPU beside three spinning siblings, the program gets at most a quarter of
    # it: its 0.4 s of CPU take 1.6 s or more of wall time, past its 1 s wall limit.
    code = """
    import os, time
    os.sched_setaffinity(0, [min(os.sched_getaffinity(0))])
    for _ in range(3):
        if os.fork() == 0:
            while True:
                pass
    t = time.process_time()
    while time.process_time() - t < 0.4:
        pass
    print("done")
    """
    res = run(sandbox, code, Limits(wall_time_s=1, cpu_time_s=30))
    assert res.wall_time_s > 1.2, res  # not killed at 1 s: waiting for a CPU does not count
    if res.status == "timeout":  # a host busier still: the credit is bounded (3 more limits)
        assert 3.5 <= res.wall_time_s < 10, res
    else:
        assert res.status == "ok" and res.stdout == "done\n", res


def test_sigterm_ignored_still_killed(sandbox: Sandbox) -> None:
    res = run(
        sandbox,
        """
        import signal, time
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)
        print("ignoring", flush=True)
        time.sleep(60)
        """,
        Limits(wall_time_s=1),
    )
    assert res.status == "timeout"
    assert res.stdout == "ignoring\n"


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_output_flood_is_cut_while_streaming(sandbox: Sandbox, stream: str) -> None:
    res = run(
        sandbox,
        f"""
        import sys
        while True:
            sys.{stream}.write("x" * 65536)
        """,
        Limits(wall_time_s=20, max_output_bytes=100_000),
    )
    assert res.status == "output_limit", res
    assert getattr(res, f"{stream}_truncated")
    assert len(getattr(res, f"{stream}_bytes")) == 100_000
    assert res.wall_time_s < 10  # killed at the cap, not at the wall limit


def test_50mb_line_without_newline(sandbox: Sandbox) -> None:
    res = run(
        sandbox,
        "import os\nos.write(1, b'y' * (50 << 20))",
        Limits(wall_time_s=20, memory_mb=256, max_output_bytes=1 << 20),
    )
    assert res.status == "output_limit"
    assert res.stdout_bytes == b"y" * (1 << 20)


def test_thread_bomb_is_contained(sandbox: Sandbox) -> None:
    res = run(
        sandbox,
        """
        import threading, time
        n = 0
        try:
            while True:
                threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
                n += 1
        except RuntimeError:
            print("capped at", n, flush=True)
        """,
        Limits(wall_time_s=5, max_processes=16),
    )
    assert res.status == "ok", res
    assert int(res.stdout.split()[-1]) <= 16


def test_cannot_raise_rlimits(sandbox: Sandbox) -> None:
    res = run(
        sandbox,
        """
        import resource
        for r in (resource.RLIMIT_CPU, resource.RLIMIT_FSIZE, resource.RLIMIT_NOFILE):
            soft, hard = resource.getrlimit(r)
            try:
                resource.setrlimit(r, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
                print("raised", r)
            except (ValueError, OSError):
                print("refused", r)
        """,
    )
    assert res.ok
    assert "raised" not in res.stdout
    assert res.stdout.count("refused") == 3


def test_filling_the_disk_stays_in_bounds(sandbox: Sandbox) -> None:
    res = run(
        sandbox,
        """
        import errno
        written = 0
        try:
            with open("/tmp/fill", "wb") as f:
                while True:
                    f.write(b"0" * (1 << 20))
                    written += 1 << 20
        except OSError as e:
            print(errno.errorcode[e.errno], written >> 20)
        """,
        Limits(wall_time_s=20, memory_mb=128, max_file_bytes=32 << 20),
    )
    assert res.status in ("ok", "memory_limit"), res
    if res.ok:
        code, mib = res.stdout.split()
        assert code in ("EFBIG", "ENOSPC")
        assert int(mib) <= 128


# -- isolation ------------------------------------------------------------------------------


def test_no_network_outside_or_to_host_loopback(sandbox: Sandbox) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        res = run(
            sandbox,
            f"""
            import socket
            for addr in [("127.0.0.1", {port}), ("10.0.0.1", 80), ("1.1.1.1", 53)]:
                s = socket.socket()
                s.settimeout(2)
                try:
                    s.connect(addr)
                    print("connected", addr)
                except OSError as e:
                    print("refused", addr, e.errno)
            """,
        )
        server.settimeout(0.2)
        with pytest.raises(OSError):
            server.accept()
    finally:
        server.close()
    assert res.ok, res
    assert "connected" not in res.stdout
    assert res.stdout.count("refused") == 3


def test_cannot_read_host_files_or_secrets(sandbox: Sandbox) -> None:
    os.environ["LLMGYM_TEST_SECRET"] = "hunter2"
    try:
        res = run(
            sandbox,
            """
            import os
            print(sorted(os.environ))
            print("secret" if "hunter2" in repr(os.environ) else "clean")
            for p in ["/etc/shadow", "/root/.bash_history", "/proc/1/environ", "/proc/1/mem"]:
                try:
                    open(p, "rb").read(16)
                    print("LEAKED", p)
                except OSError as e:
                    print("denied", p)
            print("cwd", os.getcwd(), os.getuid())
            """,
        )
    finally:
        del os.environ["LLMGYM_TEST_SECRET"]
    assert res.ok, res
    assert "clean" in res.stdout
    assert "LEAKED" not in res.stdout
    assert "cwd /tmp 65534" in res.stdout
    test_file = os.path.abspath(__file__)
    res = sandbox.run(code=f"print(open({test_file!r}).read())", limits=FAST)
    assert res.status == "runtime_error" and "No such file" in res.stderr


def test_other_processes_are_invisible(sandbox: Sandbox) -> None:
    res = run(
        sandbox,
        """
        import os
        pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
        print(pids, os.getpid())
        """,
    )
    assert res.ok, res
    pids = res.stdout.split("]")[0]
    # Only the run's own init and program, on every backend (docker: the agent is not there).
    assert len(pids.strip("[").split(",")) <= 2, res.stdout
    assert str(os.getpid()) not in pids.split(",") or os.getpid() <= 3


def test_cannot_write_outside_the_sandbox(sandbox: Sandbox) -> None:
    marker = f"/tmp/llmgym-escape-{os.getpid()}"
    res = run(
        sandbox,
        f"""
        for p in ["/usr/x", "/etc/x", "/x", "/bin/x", {marker!r} + "/../../x"]:
            try:
                open(p, "w").write("x")
                print("WROTE", p)
            except OSError:
                print("denied", p)
        open("/tmp/inside", "w").write("ok")
        """,
    )
    assert res.ok, res
    assert "WROTE" not in res.stdout.replace("WROTE /tmp", "")
    assert not os.path.exists(marker) and not os.path.exists("/x")


def test_no_state_left_for_the_next_run(sandbox: Sandbox) -> None:
    first = run(
        sandbox,
        """
        import ctypes, os
        open("/tmp/leftover", "w").write("x")
        open("/dev/shm/leftover", "w").write("x")
        libc = ctypes.CDLL(None)
        print(libc.shmget(0x1234, 4096, 0o1666))
        """,
    )
    assert first.ok, first
    second = run(
        sandbox,
        """
        import ctypes, os
        libc = ctypes.CDLL(None)
        print(os.path.exists("/tmp/leftover"), os.path.exists("/dev/shm/leftover"),
              libc.shmget(0x1234, 0, 0))
        """,
    )
    assert second.stdout.split() == ["False", "False", "-1"], second


def test_killing_parent_or_everything_hurts_nobody(sandbox: Sandbox) -> None:
    res = run(
        sandbox,
        """
        import os, signal
        for target in (os.getppid(), 1, -1):
            try:
                os.kill(target, signal.SIGKILL)
                print("sent", target, flush=True)
            except OSError as e:
                print("refused", target, flush=True)
        print("still here")
        """,
    )
    assert res.status in ("ok", "runtime_error"), res
    assert sandbox.run(code="print(2 + 2)", limits=FAST).stdout == "4\n"


def test_double_fork_daemon_dies_with_the_run(sandbox: Sandbox) -> None:
    tag = f"{os.getpid() % 1000}.{time.time_ns() % 1000:03d}"
    res = run(
        sandbox,
        f"""
        import os
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execvp("sleep", ["sleep", "{tag}"])
            os._exit(0)
        print("parent exits")
        """,
    )
    assert res.ok, res
    time.sleep(0.2)
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if tag.encode() in f.read():
                    found.append(pid)
        except OSError:
            pass
    assert not found, f"daemon survived the run: {found}"


ORPHANS = """
import os, time
for i in range(20):
    pid = os.fork()
    if pid == 0:
        if os.fork() == 0:
            os._exit(0)  # an orphan once its parent is gone: the run's init must reap it
        os._exit(0)
    os.waitpid(pid, 0)

def zombies():
    found = []
    for p in os.listdir("/proc"):
        try:
            with open(f"/proc/{p}/stat") as f:
                if p.isdigit() and f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    found.append(p)
        except OSError:
            pass
    return found

deadline = time.monotonic() + 10
while zombies() and time.monotonic() < deadline:
    time.sleep(0.01)
print("zombies", len(zombies()))
"""


def test_orphans_are_reaped(sandbox: Sandbox) -> None:
    res = run(sandbox, ORPHANS, Limits(wall_time_s=30, max_processes=16))
    assert res.ok, res
    assert res.stdout == "zombies 0\n"


def test_ptrace_and_mount_are_denied(sandbox: Sandbox) -> None:
    res = run(
        sandbox,
        """
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        print("ptrace", libc.ptrace(16, 1, 0, 0), ctypes.get_errno())  # PTRACE_ATTACH init
        print("mount", libc.mount(b"none", b"/tmp", b"tmpfs", 0, None), ctypes.get_errno())
        print("unshare", libc.unshare(0x10000000), ctypes.get_errno())  # CLONE_NEWUSER
        """,
    )
    assert res.ok, res
    for line in res.stdout.splitlines():
        name, ret, err = line.split()
        assert ret == "-1" and err in ("1", "13"), line  # EPERM / EACCES


def test_setuid_binaries_give_no_privilege(sandbox: Sandbox) -> None:
    res = sandbox.run(
        command="id -u; mount -t tmpfs none /tmp 2>&1; echo mount=$?; su -c id root </dev/null 2>&1; echo su=$?",
        limits=FAST,
    )
    assert res.stdout.splitlines()[0] != "0", res
    assert "mount=0" not in res.stdout and "su=0" not in res.stdout


def test_no_capabilities_and_no_new_privs(sandbox: Sandbox) -> None:
    res = run(sandbox, "print(open('/proc/self/status').read())")
    status = dict(line.split(":\t", 1) for line in res.stdout.splitlines() if ":\t" in line)
    for key in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
        assert int(status[key], 16) == 0, (key, status[key])
    assert status["NoNewPrivs"].strip() == "1"
    assert status["Seccomp"].strip() == "2"


# -- outcomes -------------------------------------------------------------------------------


def test_segfault_reports_the_signal(sandbox: Sandbox) -> None:
    res = run(sandbox, "import ctypes; ctypes.string_at(0)")
    assert res.status == "runtime_error"
    assert res.signal == 11 and res.exit_code is None
    assert res.signal_name == "SIGSEGV"


@pytest.mark.parametrize("code", [0, 1, 3, 255])
def test_exit_codes(sandbox: Sandbox, code: int) -> None:
    res = run(sandbox, f"import sys; print('bye'); sys.exit({code})")
    assert res.exit_code == code and res.signal is None
    assert res.status == ("ok" if code == 0 else "runtime_error")
    assert res.stdout == "bye\n"


def test_python_syntax_error_is_a_compile_error(sandbox: Sandbox) -> None:
    res = run(sandbox, "def f(:\n    pass")
    assert res.status == "compile_error"
    assert "SyntaxError" in res.compile_output and "main.py" in res.compile_output


def test_uncaught_exception_traceback_is_the_programs(sandbox: Sandbox) -> None:
    res = run(sandbox, "def f():\n    raise ValueError('boom')\nf()")
    assert res.status == "runtime_error" and res.exit_code == 1
    assert res.stderr.startswith('Traceback (most recent call last):\n  File "/tmp/main.py"')
    assert res.stderr.rstrip().endswith("ValueError: boom")
    assert "_llmgym" not in res.stderr


def test_c_and_cpp_compile_and_run(sandbox: Sandbox) -> None:
    c = sandbox.run(
        code='#include <stdio.h>\nint main(void){int x; scanf("%d",&x); printf("%d\\n", 2*x);}',
        language="c",
        stdin="21",
        limits=FAST,
    )
    if c.status == "compile_error" and "not found" in c.compile_output + c.detail:
        pytest.skip("no C compiler in this sandbox image")
    assert c.ok and c.stdout == "42\n", c
    assert c.compile_time_s is not None and c.compile_time_s > 0
    cpp = sandbox.run(
        code="#include <iostream>\nint main(){std::cout << 6*7 << std::endl;}",
        language="cpp",
        limits=FAST,
    )
    assert cpp.ok and cpp.stdout == "42\n", cpp


def test_c_compile_error_has_diagnostics(sandbox: Sandbox) -> None:
    res = sandbox.run(code="int main( { return 0; }", language="c", limits=FAST)
    assert res.status == "compile_error"
    assert "main.c:1" in res.compile_output and "error" in res.compile_output


def test_shell(sandbox: Sandbox) -> None:
    res = sandbox.run(
        code="echo hi; cat data.txt; exit 4", language="shell", files={"data.txt": "D"}
    )
    assert res.status == "runtime_error" and res.exit_code == 4
    assert res.stdout == "hi\nD"


# -- facts ----------------------------------------------------------------------------------


def test_cpu_time_is_measured_truthfully(sandbox: Sandbox) -> None:
    res = run(
        sandbox,
        """
        import time
        t = time.process_time()
        while time.process_time() - t < 0.5:
            pass
        """,
        Limits(wall_time_s=30),
    )
    assert res.ok, res
    assert 0.4 <= res.cpu_time_s <= 0.6, res.cpu_time_s


def test_wall_time_is_measured_truthfully(sandbox: Sandbox) -> None:
    res = run(sandbox, "import time; time.sleep(0.4)", Limits(wall_time_s=30))
    assert res.ok, res
    assert 0.4 <= res.wall_time_s < 2.5, res.wall_time_s  # never less; later only under load


def test_peak_memory_is_measured_truthfully(sandbox: Sandbox) -> None:
    small = run(sandbox, "x = bytearray(1 << 20)", Limits(wall_time_s=30, memory_mb=512))
    assert small.ok, small
    if sandbox.isolation()["peak_memory"] == "cgroup":
        # The program's own memory, not the warm interpreter's pages it shares with the zygote.
        assert small.peak_memory_mb < 8, small.peak_memory_mb
    res = run(
        sandbox,
        """
        x = bytearray(200 << 20)
        for i in range(0, len(x), 4096):
            x[i] = 1
        """,
        Limits(wall_time_s=30, memory_mb=512),
    )
    assert res.ok, res
    assert 150 <= res.peak_memory_mb <= 250, res.peak_memory_mb


def test_stdin_files_and_result_channel(sandbox: Sandbox) -> None:
    harness = """
    import json, os, solution, sys
    out = os.fdopen(3, "w")
    data = sys.stdin.read()
    print("candidate output is not trusted")
    out.write(json.dumps({"sq": solution.square(int(data)), "data": data}))
    """
    res = run(
        sandbox, harness, files={"solution.py": "def square(x):\n    return x * x\n"}, stdin="12"
    )
    assert res.ok, res
    import json

    assert json.loads(res.result_bytes) == {"sq": 144, "data": "12"}
    assert res.stdout == "candidate output is not trusted\n"


def test_given_files_are_read_only_for_the_program(sandbox: Sandbox) -> None:
    res = run(
        sandbox,
        """
        try:
            open("harness.py", "w").write("pwned")
            print("modified")
        except OSError:
            print("protected")
        """,
        files={"harness.py": "print(1)"},
    )
    assert res.stdout == "protected\n"


def test_invalid_utf8_output_decodes_safely(sandbox: Sandbox) -> None:
    res = run(sandbox, "import os; os.write(1, b'ok \\xff\\xfe \\xc3'); os.write(2, b'\\x80')")
    assert res.ok
    assert res.stdout_bytes == b"ok \xff\xfe \xc3"
    assert res.stdout == "ok \ufffd\ufffd \ufffd"
    assert res.stderr == "\ufffd"


def test_run_many_keeps_order_and_outputs(sandbox: Sandbox) -> None:
    items = [{"code": f"print({i} * {i})", "limits": FAST} for i in range(12)]
    results = sandbox.run_many(items)
    assert [r.stdout for r in results] == [f"{i * i}\n" for i in range(12)]


def test_arun(sandbox: Sandbox) -> None:
    import asyncio

    async def main() -> list[str]:
        rs = await asyncio.gather(
            *(sandbox.arun(code=f"print({i})", limits=FAST) for i in range(6))
        )
        return [r.stdout for r in rs]

    assert asyncio.run(main()) == [f"{i}\n" for i in range(6)]

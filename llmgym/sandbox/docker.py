"""The docker backend: a pool of warm, hardened containers, each running the sandbox's zygote.

Each container: no network (``network_mode="none"``), read-only root, every capability dropped
but the four the zygote needs to build each run's isolation (``SYS_ADMIN`` for namespaces and
mounts, ``SETUID``, ``SETGID``, ``SETPCAP``), no-new-privileges, pids and memory limits. Inside,
the zygote (the container's agent, root of the container) does what it does on the local
backend: every run gets new pid, mount, IPC, network and UTS namespaces, a fresh /tmp and
/dev/shm, a read-only root, uid 65534 with no capabilities, no-new-privs and the seccomp filter.
So a run starts from a state no earlier run can have touched (nothing to wipe, nothing a
cleanup can miss), and the agent is out of its runs' reach (another pid namespace, another uid).

Each run also gets cgroups of its own, made by this process *inside the container's cgroup*
(``CgroupManager(parents=...)``): the run's peak memory and CPU time count every process of the
run, reaped or not, and every tmpfs and memfd page it touched; its memory limit is its own, so
an overrun through /tmp or a memfd is a ``memory_limit`` while the agent, outside that cgroup,
lives on. Where the container's cgroups cannot be nested (a cgroup v2 host, whose container
cgroups hold processes and so cannot delegate), the container's own cgroup stands in for the
run's, and ``isolation()`` says so.

The parent talks to each container's agent over a Unix socket bind-mounted into it, the same
protocol as the local backend (file descriptors for the program's stdio are passed through it),
so the Docker daemon must be local. A run is killed with a pidfd of its init, or, where this
process cannot signal into the container's pid namespace (a trainer in a pid namespace of its
own), by asking the agent on the run's control socket. The image is built offline from the
host's own files: its Python installation (standard library), the shared libraries they need, a
shell and coreutils, and, when present, gcc/g++ with libc headers. No registry is contacted.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import queue
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from llmgym.sandbox import _cgroup, local, supervisor
from llmgym.sandbox._zygote import DEFAULT_PATH
from llmgym.sandbox.base import RunRequest, Sandbox
from llmgym.sandbox.errors import BackendUnavailable
from llmgym.sandbox.limits import Limits
from llmgym.sandbox.result import ExecResult

__all__ = ["DockerSandbox", "build_image"]

IMAGE_REPO = "llmgym-sandbox"
AGENT_DIR = "/opt/llmgym"
_HERE = os.path.dirname(os.path.abspath(__file__))
_SHELL_TOOLS = (
    "sh", "bash", "dash", "cat", "echo", "ls", "sleep", "id", "env", "head", "tail", "wc", "sort",
    "uniq", "tr", "cut", "grep", "sed", "awk", "mawk", "mkdir", "rm", "cp", "mv", "true", "false",
    "test", "seq", "printf", "yes", "touch", "chmod", "expr", "tee", "xargs", "find", "diff",
    "basename", "dirname", "date", "timeout", "kill", "ps", "su", "mount",
)  # fmt: skip
_PY_SKIP = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "site-packages", "lib2to3"}
_HOW_TO_START = (
    "start one with `sudo systemctl start docker`, or `sudo dockerd &` (this repo's "
    "`.ci/start-dockerd` does it on CI), and check with `docker info`"
)


def _client() -> Any:
    try:
        import docker
    except ImportError:
        raise BackendUnavailable(
            "the docker backend needs the Docker SDK: pip install 'llmgym[docker]'"
        ) from None
    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure here means "no daemon"
        raise BackendUnavailable(f"no Docker daemon answers ({exc}); {_HOW_TO_START}") from None
    return client


# ----------------------------------------------------------------------------------------------
# The image
# ----------------------------------------------------------------------------------------------


def _ldd(paths: Iterable[str]) -> set[str]:
    libs: set[str] = set()
    for path in paths:
        try:
            out = subprocess.run(["ldd", path], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        for m in re.finditer(r"(/\S+) \(0x", out):
            libs.add(m.group(1))
    return libs


def _walk(root: str, skip: set[str] = frozenset()) -> Iterable[str]:  # type: ignore[assignment]
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in skip and not d.startswith("config-")]
        for name in filenames:
            yield os.path.join(dirpath, name)


def _host_files(python: str) -> set[str]:
    """Every host path the image needs (symlinks are kept as symlinks)."""
    files: set[str] = set()
    real_python = os.path.realpath(python)
    prefix = os.path.dirname(os.path.dirname(real_python))
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    files.add(real_python)
    stdlib = os.path.join(prefix, "lib", version)
    files.update(_walk(stdlib, _PY_SKIP))
    for name in os.listdir(os.path.join(prefix, "lib")):
        if name.startswith("libpython"):
            files.add(os.path.join(prefix, "lib", name))
    elves = [real_python] + [p for p in files if p.endswith(".so")]
    tools = [shutil.which(t, path=DEFAULT_PATH) for t in _SHELL_TOOLS]
    elves += [t for t in tools if t]
    files.update(t for t in tools if t)
    gcc, gxx = shutil.which("gcc"), shutil.which("g++")
    if gcc and gxx:
        progs = [gcc, gxx, shutil.which("as"), shutil.which("ld")]
        for name in ("cc1", "cc1plus", "collect2", "lto-wrapper", "liblto_plugin.so"):
            out = subprocess.run([gcc, f"-print-prog-name={name}"], capture_output=True, text=True)
            if out.stdout.strip().startswith("/"):
                progs.append(out.stdout.strip())
        libgcc = subprocess.run([gcc, "-print-libgcc-file-name"], capture_output=True, text=True)
        gcc_dir = os.path.dirname(libgcc.stdout.strip())
        if os.path.isdir(gcc_dir):
            files.update(p for p in _walk(gcc_dir) if "lto1" not in p)
        for p in progs:
            if p:
                files.add(p)
                files.add(os.path.realpath(p))
                elves.append(os.path.realpath(p))
        for inc in ("c++", "x86_64-linux-gnu", "aarch64-linux-gnu", "linux", "asm-generic"):
            if os.path.isdir(f"/usr/include/{inc}"):
                files.update(_walk(f"/usr/include/{inc}"))
        files.update(
            os.path.join("/usr/include", n) for n in os.listdir("/usr/include") if n.endswith(".h")
        )
        multiarch = subprocess.run([gcc, "-print-multiarch"], capture_output=True, text=True)
        libdir = f"/usr/lib/{multiarch.stdout.strip()}"
        if os.path.isdir(libdir):
            for n in os.listdir(libdir):
                if n.endswith(".o") or re.match(
                    r"lib(c|m|mvec|pthread|dl|rt|stdc\+\+|gcc_s)(\.so|_nonshared\.a|\.a)", n
                ):
                    files.add(os.path.join(libdir, n))
    libs = _ldd(elves)
    files.update(libs)
    files.update(os.path.realpath(p) for p in libs)
    return {f for f in files if os.path.lexists(f)}


def _add_path(tar: tarfile.TarFile, path: str, seen: set[str]) -> None:
    parts = path.strip("/").split("/")
    for i in range(1, len(parts)):  # parents first, as directories or symlinks
        parent = "/" + "/".join(parts[:i])
        if parent not in seen:
            seen.add(parent)
            info = tar.gettarinfo(parent, arcname=parent.lstrip("/"))
            if info.isdir():
                info.mode = 0o755
            tar.addfile(info)
            if info.issym():
                target = os.path.join(os.path.dirname(parent), os.readlink(parent))
                _add_path(tar, os.path.normpath(target) + "/.", seen)
    if path.endswith("/.") or path in seen:
        return
    seen.add(path)
    info = tar.gettarinfo(path, arcname=path.lstrip("/"))
    if info.islnk():  # the same inode under another name: store it again, as a file
        info.type = tarfile.REGTYPE
        info.linkname = ""
        info.size = os.stat(path).st_size
    info.uid = info.gid = 0
    info.mode &= 0o755
    if info.isreg():
        with open(path, "rb") as f:
            tar.addfile(info, f)
    else:
        tar.addfile(info)
        if info.issym():
            target = os.path.normpath(os.path.join(os.path.dirname(path), os.readlink(path)))
            if os.path.lexists(target):
                _add_path(tar, target, seen)


def _text(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    tar.addfile(info, io.BytesIO(data))


def build_image(client: Any = None, python: str | None = None, *, force: bool = False) -> str:
    """Build (once) the sandbox image from host files; returns its tag. No registry is used."""
    client = client or _client()
    python = python or sys.executable
    files = sorted(_host_files(python))
    agent = [os.path.join(_HERE, n) for n in ("_zygote.py", "_seccomp.py")]
    digest = hashlib.sha256()
    for path in files + agent:
        st = os.lstat(path)
        digest.update(f"{path}\0{st.st_size}\0{int(st.st_mtime)}\n".encode())
    tag = f"{IMAGE_REPO}:{digest.hexdigest()[:16]}"
    if not force:
        try:
            client.images.get(tag)
            return tag
        except Exception:  # noqa: BLE001 - docker.errors.ImageNotFound
            pass
    with tempfile.NamedTemporaryFile(suffix=".tar") as tmp:
        with tarfile.open(fileobj=tmp, mode="w") as tar:
            seen: set[str] = set()
            for d in ("tmp", "proc", "dev", "sys", "etc", "run", "run/llmgym", "opt", "opt/llmgym"):
                info = tarfile.TarInfo(d)
                info.type = tarfile.DIRTYPE
                info.mode = 0o1777 if d == "tmp" else 0o755
                tar.addfile(info)
                seen.add("/" + d)
            for path in files:
                # Store each file under its parent's real directory (/lib -> /usr/lib...).
                real = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
                _add_path(tar, real, seen)
            for link in ("bin", "sbin", "lib", "lib64", "lib32"):
                if os.path.islink("/" + link) and "/" + link not in seen:
                    _add_path(tar, "/" + link, seen)
            for path in agent:
                with open(path, "rb") as f:
                    _text(tar, f"opt/llmgym/{os.path.basename(path)}", f.read())
            _text(
                tar,
                "etc/passwd",
                b"root:x:0:0::/root:/bin/sh\nsandbox:x:65534:65534::/tmp:/bin/sh\n",
            )
            _text(tar, "etc/group", b"root:x:0:\nsandbox:x:65534:\n")
            _text(tar, "etc/hosts", b"127.0.0.1 localhost\n")
            _text(tar, "etc/python-path", os.path.realpath(python).encode())
        tmp.flush()
        repo, version = tag.split(":")
        client.api.import_image_from_file(tmp.name, repository=repo, tag=version)
    return tag


# ----------------------------------------------------------------------------------------------
# The pool
# ----------------------------------------------------------------------------------------------


AGENT_CAPS = ("SYS_ADMIN", "SETUID", "SETGID", "SETPCAP")
"""Capabilities the container keeps, for its agent to build each run's isolation; a run drops
them all (uid 65534, empty bounding set, no-new-privs) before any of its code runs."""
_AGENT_MEMORY_MB = 96
"""Room the container has beyond its run's own limit: the agent, its spare run, kernel memory."""
_AGENT_PROCESSES = 16


def _container_cgroups(cid: str, version: int | None) -> dict[str, str] | None:
    """The container's own cgroup directories as this host sees them (controller -> path),
    to nest each run's cgroups in; None where it has none this process can find or nest in."""
    if version != 1:
        return None  # v2: the container's cgroup holds its processes, so it cannot delegate
    found: dict[str, str] = {}
    for c in ("memory", "pids", "cpuacct"):
        for rel in (f"docker/{cid}", f"system.slice/docker-{cid}.scope"):
            path = f"/sys/fs/cgroup/{c}/{rel}"
            if os.path.isdir(path):
                found[c] = path
                break
        else:
            return None
    return found


class _Agent:
    """One warm container, the socket to its zygote, and the cgroups its runs get."""

    def __init__(self, owner: DockerSandbox, key: tuple[int, int, bool]) -> None:
        memory_mb, max_processes, network = key
        self.key = key
        self.runs = 0
        self._owner_pid = os.getpid()
        self.sockdir = tempfile.mkdtemp(prefix="llmgym-docker-")
        os.chmod(self.sockdir, 0o755)
        path = os.path.join(self.sockdir, "agent.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock: socket.socket | None = None
        self.container: Any = None
        self.cgroups: _cgroup.CgroupManager | None = None
        self._cgroup: tuple[int, str] | None = None
        try:
            listener.bind(path)
            os.chmod(path, 0o777)
            listener.listen(1)
            cfg = {
                "mode": "namespaces",
                "socket_path": "/run/llmgym/agent.sock",
                "uid": 65534,
                "gid": 65534,
                "userns": False,
                "network": network,
                "binds": owner.binds,
                "etc_binds": list(local._ETC_BINDS),
                "preload": list(local.DEFAULT_PRELOAD),
                "seccomp": owner.seccomp,
                "init_spawner": True,
            }
            self.container = owner.docker().containers.run(
                owner.image,
                command=[
                    owner.python,
                    "-E",
                    "-s",
                    "-B",
                    f"{AGENT_DIR}/_zygote.py",
                    json.dumps(cfg),
                ],
                detach=True,
                # Gone with its agent: when this process dies without close(), the agent sees
                # its socket close and exits, and no stopped container is left behind.
                auto_remove=True,
                network_mode="bridge" if network else "none",
                read_only=True,
                cap_drop=["ALL"],
                cap_add=list(AGENT_CAPS),
                security_opt=["no-new-privileges", *owner.security_opt],
                pids_limit=max_processes + _AGENT_PROCESSES,
                mem_limit=f"{memory_mb + _AGENT_MEMORY_MB}m",
                memswap_limit=f"{memory_mb + _AGENT_MEMORY_MB}m",
                user="0:0",
                volumes={self.sockdir: {"bind": "/run/llmgym", "mode": "ro"}},
                environment=owner.settings.base_env,
                working_dir="/",
                labels={"llmgym.sandbox": str(os.getpid())},
                ipc_mode="private",
            )
            listener.settimeout(60)
            self.sock, _ = listener.accept()
            self.sock.settimeout(60)
            ready = json.loads(self.sock.recv(1 << 16) or b"{}")
            self.sock.settimeout(None)
            if ready.get("type") != "ready":
                detail = ready.get("detail") or ready or self._logs()
                raise BackendUnavailable(f"the container's agent did not start: {detail}")
            self._cgroup = self._find_cgroup()
            parents = _container_cgroups(self.container.id, owner.host_cgroups)
            if parents is not None:
                manager = _cgroup.CgroupManager(parents=parents)
                if manager.available:
                    self.cgroups = manager
                else:
                    manager.close()
        except BaseException:
            self.close()
            raise
        finally:
            listener.close()
            # Connected (or failed): the folder has served; the container keeps its mount.
            shutil.rmtree(self.sockdir, ignore_errors=True)

    def _logs(self) -> str:
        try:
            return self.container.logs().decode("utf-8", "replace")[-500:].strip() or "no answer"
        except Exception:  # noqa: BLE001 - already gone
            return "no answer"

    def _find_cgroup(self) -> tuple[int, str] | None:
        """(cgroup version, directory) of the container's memory cgroup, as the host sees it."""
        cid = self.container.id
        for version, path in (
            (1, f"/sys/fs/cgroup/memory/docker/{cid}"),
            (1, f"/sys/fs/cgroup/memory/system.slice/docker-{cid}.scope"),
            (2, f"/sys/fs/cgroup/system.slice/docker-{cid}.scope"),
            (2, f"/sys/fs/cgroup/docker/{cid}"),
        ):
            if os.path.isdir(path):
                return version, path
        return None

    def oom_kills(self) -> int:
        if self._cgroup is None:
            return 0
        version, path = self._cgroup
        try:
            with open(path + ("/memory.oom_control" if version == 1 else "/memory.events")) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except OSError:
            pass
        return 0

    def submit(self, message: dict[str, Any], fds: Sequence[int]) -> None:
        assert self.sock is not None
        import array

        data = json.dumps(message).encode()
        anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())]
        self.sock.sendmsg([data], anc)

    def forget(self) -> None:
        """In a forked child: close this process's copy of the socket; the container, its
        cgroups and its socket folder stay the parent's."""
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        self.container = self.cgroups = None

    def close(self) -> None:
        if os.getpid() != self._owner_pid:
            self.forget()
            return
        # The runs' cgroups first: a container cgroup with cgroups below it cannot be removed.
        if self.cgroups is not None:
            self.cgroups.close()
        if self.sock is not None:
            self.sock.close()
        if self.container is not None:
            try:
                self.container.remove(force=True)
            except Exception:  # noqa: BLE001 - already gone
                pass


class _RunProbe:
    """The container's cgroup, seen as one run's, where the run cannot have cgroups of its own
    (see the module docstring): OOM kills and peak memory since the run began.

    One run at a time per container, so what the container's memory cgroup gained during the
    run is the run's (its program, its /tmp files, its kernel memory): the high-water mark is
    reset when the run begins and read, minus the agent's own usage then, when it ends. Where
    the kernel cannot reset it, ``peak_memory_bytes`` is None and the result falls back to the
    program's peak RSS.
    """

    def __init__(self, agent: _Agent) -> None:
        self.agent = agent
        self.before = agent.oom_kills()
        self._peak_fd: int | None = None
        self._base = 0
        cg = agent._cgroup
        if cg is None:
            return
        version, path = cg
        try:
            if version == 1:
                with open(path + "/memory.max_usage_in_bytes", "w") as f:
                    f.write("0")  # resets the high-water mark to the current usage
                with open(path + "/memory.usage_in_bytes") as f:
                    self._base = int(f.read())
                self._peak_fd = -1
            else:  # memory.peak is reset per open file by a write (Linux >= 6.12)
                fd = os.open(path + "/memory.peak", os.O_RDWR | os.O_CLOEXEC)
                try:
                    os.write(fd, b"reset")
                    with open(path + "/memory.current") as f:
                        self._base = int(f.read())
                except OSError:
                    os.close(fd)
                    raise
                self._peak_fd = fd
        except (OSError, ValueError):
            self._peak_fd = None

    def oom_kills(self) -> int:
        return self.agent.oom_kills() - self.before

    def peak_memory_bytes(self) -> int | None:
        if self._peak_fd is None or self.agent._cgroup is None:
            return None
        try:
            if self._peak_fd == -1:
                with open(self.agent._cgroup[1] + "/memory.max_usage_in_bytes") as f:
                    peak = int(f.read())
            else:
                peak = int(os.pread(self._peak_fd, 64, 0))
        except (OSError, ValueError):
            return None
        return max(0, peak - self._base)

    def close(self) -> None:
        if self._peak_fd is not None and self._peak_fd >= 0:
            os.close(self._peak_fd)
        self._peak_fd = None


def _host_cgroup_version() -> int | None:
    """The cgroup version Docker's containers get on this host (1 on hybrid mounts)."""
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        return 2
    if os.path.isdir("/sys/fs/cgroup/memory"):
        return 1
    return None


def sweep_container_cgroups(client: Any = None) -> list[str]:
    """Remove what dead sandboxes left inside containers' cgroups: the orphans of every
    ``llmgym`` directory below a container's cgroup, then that directory and the cgroup of a
    container that no longer exists, when empty (Docker cannot remove a container's cgroup
    while cgroups of ours are below it). Returns the paths removed."""
    removed: list[str] = []
    live: set[str] | None = None
    for base in _cgroup.llmgym_directories():
        parent = os.path.dirname(base)
        m = re.search(r"(?:^|/)(?:docker-)?([0-9a-f]{64})(?:\.scope)?$", parent)
        if m is None:
            continue  # not a container's
        done, _ = _cgroup.sweep(base)
        removed += [d.path for d in done]
        try:
            os.rmdir(base)
            removed.append(base)
        except OSError:
            continue
        if live is None:
            try:
                live = {c.id for c in (client or _client()).containers.list(all=True)}
            except Exception:  # noqa: BLE001 - no daemon: leave containers' cgroups alone
                live = {m.group(1)}
        if m.group(1) not in live:
            try:
                os.rmdir(parent)
                removed.append(parent)
            except OSError:
                pass
    return removed


class DockerSandbox(Sandbox):
    """Runs programs in a pool of warm hardened containers (see the module docstring).

    Args:
        image: image tag to use; default: build (once) ``llmgym-sandbox:<hash>`` from host files.
        pool_size: warm containers per distinct (memory, processes, network) limits; default:
            ``max_concurrency``.
        recycle_after: replace a container after this many runs.
        seccomp: add the sandbox's seccomp filter to every run.
    """

    backend = "docker"
    supports_sessions = True

    def __init__(
        self,
        *,
        image: str | None = None,
        pool_size: int | None = None,
        recycle_after: int = 500,
        seccomp: bool = True,
        max_concurrency: int | None = None,
    ) -> None:
        super().__init__(max_concurrency=max_concurrency)
        self._client = _client()
        self._client_pid = os.getpid()
        self.python = os.path.realpath(sys.executable)
        if image is None:
            try:
                image = build_image(self._client, self.python)
            except BackendUnavailable:
                raise
            except Exception as exc:  # noqa: BLE001
                raise BackendUnavailable(f"could not build the sandbox image: {exc}") from None
        self.image = image
        self.pool_size = pool_size or self.max_concurrency
        self.recycle_after = recycle_after
        self.seccomp = seccomp
        self.binds = local._host_binds(self.python, ())
        self.host_cgroups = _host_cgroup_version()
        self.security_opt = self._security_opt()
        self.settings = supervisor.RunSettings(
            backend=self.backend, python=self.python, fast_path=True, mode="namespaces"
        )
        self._pools: dict[tuple[int, int, bool], queue.Queue[_Agent]] = {}
        self._all: set[_Agent] = set()
        self._lock = threading.Lock()
        sweep_container_cgroups(self._client)
        self._pool(self._key(Limits()))  # fail now if containers cannot start

    def docker(self) -> Any:
        """The Docker client of this process (a forked child makes its own: a client's
        connections cannot be shared between processes)."""
        if self._client_pid != os.getpid():
            self._client = _client()
            self._client_pid = os.getpid()
        return self._client

    @property
    def client(self) -> Any:
        return self.docker()

    def _security_opt(self) -> list[str]:
        """What the daemon's own confinement needs to let the agent mount: Docker's AppArmor
        profile forbids every mount, so the agent runs unconfined by it where it is on (each
        run still has the sandbox's seccomp filter, no capabilities and uid 65534)."""
        try:
            info = self._client.info()
        except Exception:  # noqa: BLE001
            return []
        options = " ".join(info.get("SecurityOptions") or [])
        return ["apparmor=unconfined"] if "apparmor" in options else []

    @staticmethod
    def _key(limits: Limits) -> tuple[int, int, bool]:
        return (limits.memory_mb, limits.max_processes, limits.network)

    def _new_agent(self, key: tuple[int, int, bool]) -> _Agent:
        agent = _Agent(self, key)
        with self._lock:
            self._all.add(agent)
        return agent

    def _pool(self, key: tuple[int, int, bool]) -> queue.Queue[_Agent]:
        with self._lock:
            pool = self._pools.get(key)
            if pool is not None:
                return pool
            pool = queue.Queue()
            self._pools[key] = pool
        agents: list[_Agent] = []
        errors: list[str] = []

        def start() -> None:
            try:
                agents.append(self._new_agent(key))
            except Exception as exc:  # noqa: BLE001 - reported below if none starts
                errors.append(str(exc))

        threads = [threading.Thread(target=start) for _ in range(self.pool_size)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if not agents:
            with self._lock:
                del self._pools[key]
            why = errors[0] if errors else "no reason given"
            raise BackendUnavailable(
                f"no sandbox container could start from image {self.image}: {why}"
            )
        for a in agents:
            pool.put(a)
        return pool

    def _retire(self, agent: _Agent) -> None:
        with self._lock:
            self._all.discard(agent)
        agent.close()

    def _execute(self, request: RunRequest) -> ExecResult:
        key = self._key(request.limits)
        pool = self._pool(key)
        agent = pool.get()
        healthy = False
        probe = _RunProbe(agent) if agent.cgroups is None else None
        try:
            result = supervisor.execute_on(
                agent,
                request,
                self.settings,
                agent.cgroups,
                oom_probe=probe,
                container=agent.cgroups is None,
            )
            agent.runs += 1
            healthy = result.status != "sandbox_error" and agent.runs < self.recycle_after
            return result
        finally:
            if probe is not None:
                probe.close()
            if healthy and not self._closed:
                pool.put(agent)
            else:
                self._retire(agent)
                if not self._closed:
                    try:
                        pool.put(self._new_agent(key))
                    except Exception:  # noqa: BLE001 - retried at the next run
                        pass

    def _accounting(self) -> str:
        """``"run cgroup"`` where each run has cgroups of its own inside its container;
        ``"container cgroup"`` where the container's stands in for the run's (peak memory reset
        when the run starts); ``"rss"`` where not even that is readable."""
        with self._lock:
            agent = next(iter(self._all), None)
        if agent is not None and agent.cgroups is not None:
            return "run cgroup"
        cg = agent._cgroup if agent is not None else None
        if cg is None:
            return "rss"
        version, path = cg
        if version == 1:  # resetting here would disturb a run in flight: ask, don't try
            ok = os.access(path + "/memory.max_usage_in_bytes", os.W_OK)
            return "container cgroup" if ok else "rss"
        try:  # v2: a reset is private to the file descriptor that made it
            fd = os.open(path + "/memory.peak", os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            return "rss"
        try:
            os.write(fd, b"reset")
            return "container cgroup"
        except OSError:
            return "rss"
        finally:
            os.close(fd)

    def isolation(self) -> dict[str, Any]:
        accounting = self._accounting()
        degraded = []
        if accounting != "run cgroup":
            degraded.append(
                "runs cannot have cgroups of their own inside the container (cgroup v2 host): "
                f"memory and CPU are the container's ({accounting}), limited with the agent's"
            )
        if self.security_opt:
            degraded.append(f"the agent runs with {', '.join(self.security_opt)} (it mounts)")
        return {
            "backend": self.backend,
            "image": self.image,
            "container": "no network, read-only root, cap_drop ALL but "
            f"{', '.join(AGENT_CAPS)} (the agent's), no-new-privileges, pids and memory limits",
            "namespaces": ["pid", "mount", "net", "ipc", "uts"],
            "uid": 65534,
            "peak_memory": accounting,
            "seccomp": self.seccomp,
            "pool_size": self.pool_size,
            "degraded": degraded,
        }

    def _forked(self) -> None:
        super()._forked()
        for agent in list(self._all):
            agent.forget()  # the parent's containers: left running, for the parent
        self._all = set()
        self._pools = {}
        self._lock = threading.Lock()
        self._client_pid = -1  # its connections are the parent's: a new client on first use

    def close(self) -> None:
        super().close()
        with self._lock:
            agents = list(self._all)
            self._all.clear()
            self._pools.clear()
        if sys.is_finalizing():  # no new threads now: one after the other
            for a in agents:
                a.close()
        else:
            threads = [threading.Thread(target=a.close) for a in agents]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        if self._client_pid == os.getpid():
            try:
                self._client.close()
            except Exception:  # noqa: BLE001
                pass

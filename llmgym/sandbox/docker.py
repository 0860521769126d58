"""The docker backend: a pool of warm, hardened containers, each running the zygote as its init.

Each container: no network (``network_mode="none"``), read-only root, tmpfs /tmp and /dev/shm,
every capability dropped, no-new-privileges, Docker's default seccomp profile plus the sandbox's
own filter, uid 65534, pids and memory limits. Its init is the sandbox's zygote in container
mode (not tini: a program of the same uid could kill a tini-spawned agent, while a pid-1 agent
ignores every signal its runs send it). It runs one program at a time; before each run it wipes
/tmp, /dev/shm and SysV IPC objects, and after each run every process the run left is killed.

The parent talks to each container's agent over a Unix socket bind-mounted into it, the same
protocol as the local backend (file descriptors for the program's stdio are passed through it),
so the Docker daemon must be local. The image is built offline from the host's own files: its
Python installation (standard library), the shared libraries they need, a shell and coreutils,
and, when present, gcc/g++ with libc headers. No registry is contacted.
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

from llmgym.sandbox import local
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


class _Agent:
    """One warm container and the socket to its zygote."""

    def __init__(self, owner: DockerSandbox, key: tuple[int, int, bool]) -> None:
        memory_mb, max_processes, network = key
        self.key = key
        self.runs = 0
        self.sockdir = tempfile.mkdtemp(prefix="llmgym-docker-")
        os.chmod(self.sockdir, 0o755)
        path = os.path.join(self.sockdir, "agent.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock: socket.socket | None = None
        self.container: Any = None
        try:
            listener.bind(path)
            os.chmod(path, 0o777)
            listener.listen(1)
            cfg = {
                "mode": "container",
                "socket_path": "/run/llmgym/agent.sock",
                "uid": 65534,
                "gid": 65534,
                "userns": False,
                "network": network,
                "seccomp": owner.seccomp,
                "preload": list(local.DEFAULT_PRELOAD),
            }
            self.container = owner.client.containers.run(
                owner.image,
                command=[owner.python, "-E", "-s", f"{AGENT_DIR}/_zygote.py", json.dumps(cfg)],
                detach=True,
                # Gone with its agent: when this process dies without close(), the agent sees
                # its socket close and exits, and no stopped container is left behind.
                auto_remove=True,
                network_mode="bridge" if network else "none",
                read_only=True,
                tmpfs={
                    "/tmp": f"rw,exec,nosuid,nodev,size={memory_mb}m,mode=1777",
                    "/dev/shm": f"rw,nosuid,nodev,noexec,size={memory_mb}m",
                },
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                pids_limit=max_processes + 1,  # + the agent
                # The agent's own ~20 MiB share the container's limit with the run.
                mem_limit=f"{memory_mb + 32}m",
                memswap_limit=f"{memory_mb + 32}m",
                user="65534:65534",
                volumes={self.sockdir: {"bind": "/run/llmgym", "mode": "ro"}},
                environment=owner.settings.base_env,
                working_dir="/tmp",
                labels={"llmgym.sandbox": str(os.getpid())},
                ipc_mode="private",
            )
            listener.settimeout(60)
            self.sock, _ = listener.accept()
            ready = json.loads(self.sock.recv(1 << 16) or b"{}")
            if ready.get("type") != "ready":
                raise BackendUnavailable(f"the container's agent did not start: {ready}")
        except BaseException:
            self.close()
            raise
        finally:
            listener.close()
            try:
                os.unlink(path)
            except OSError:
                pass
        self._cgroup = self._find_cgroup()

    def _find_cgroup(self) -> tuple[int, str] | None:
        """(cgroup version, directory) of the container's memory cgroup, as the host sees it."""
        cid = self.container.id
        for version, path in (
            (1, f"/sys/fs/cgroup/memory/docker/{cid}"),
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

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
        if self.container is not None:
            try:
                self.container.remove(force=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
        shutil.rmtree(self.sockdir, ignore_errors=True)


class _RunProbe:
    """The container's cgroup, seen as one run's: OOM kills and peak memory since the run began.

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


class DockerSandbox(Sandbox):
    """Runs programs in a pool of warm hardened containers (see the module docstring).

    Args:
        image: image tag to use; default: build (once) ``llmgym-sandbox:<hash>`` from host files.
        pool_size: warm containers per distinct (memory, processes, network) limits; default:
            ``max_concurrency``.
        recycle_after: replace a container after this many runs.
        seccomp: add the sandbox's seccomp filter on top of Docker's.
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
        self.client = _client()
        self.python = os.path.realpath(sys.executable)
        if image is None:
            try:
                image = build_image(self.client, self.python)
            except BackendUnavailable:
                raise
            except Exception as exc:  # noqa: BLE001
                raise BackendUnavailable(f"could not build the sandbox image: {exc}") from None
        self.image = image
        self.pool_size = pool_size or self.max_concurrency
        self.recycle_after = recycle_after
        self.seccomp = seccomp
        self.settings = local.RunSettings(
            backend=self.backend, python=self.python, fast_path=True, mode="container"
        )
        self._pools: dict[tuple[int, int, bool], queue.Queue[_Agent]] = {}
        self._all: set[_Agent] = set()
        self._lock = threading.Lock()
        self._pool(self._key(Limits()))  # fail now if containers cannot start

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
        agents = []
        threads = [
            threading.Thread(target=lambda: agents.append(self._new_agent(key)))
            for _ in range(self.pool_size)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if not agents:
            with self._lock:
                del self._pools[key]
            raise BackendUnavailable(f"no sandbox container could start from image {self.image}")
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
        probe = _RunProbe(agent)
        try:
            result = local.execute_on(
                agent, request, self.settings, None, oom_probe=probe, container=True
            )
            agent.runs += 1
            healthy = result.status != "sandbox_error" and agent.runs < self.recycle_after
            return result
        except OSError:
            raise
        finally:
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

    def _peak_memory_mode(self) -> str:
        """``"cgroup"`` where a run's peak memory is its container's cgroup high-water mark, reset
        when the run starts; ``"rss"`` (the program's peak resident set, which also counts the
        warm interpreter's pages it shares) where the kernel cannot reset that mark."""
        with self._lock:
            agent = next(iter(self._all), None)
        cg = agent._cgroup if agent is not None else None
        if cg is None:
            return "rss"
        version, path = cg
        if version == 1:  # resetting here would disturb a run in flight: ask, don't try
            return "cgroup" if os.access(path + "/memory.max_usage_in_bytes", os.W_OK) else "rss"
        try:  # v2: a reset is private to the file descriptor that made it
            fd = os.open(path + "/memory.peak", os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            return "rss"
        try:
            os.write(fd, b"reset")
            return "cgroup"
        except OSError:
            return "rss"
        finally:
            os.close(fd)

    def isolation(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "image": self.image,
            "container": "no network, read-only root, tmpfs /tmp and /dev/shm, cap_drop ALL, "
            "no-new-privileges, uid 65534, pids and memory limits",
            "peak_memory": self._peak_memory_mode(),
            "seccomp": self.seccomp,
            "pool_size": self.pool_size,
            "degraded": [
                "per-run isolation inside a container is process-level (one run at a time per "
                "container, cleanup between runs); memory limits are the container's",
            ],
        }

    def close(self) -> None:
        super().close()
        with self._lock:
            agents = list(self._all)
            self._all.clear()
            self._pools.clear()
        threads = [threading.Thread(target=a.close) for a in agents]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        try:
            self.client.close()
        except Exception:  # noqa: BLE001
            pass

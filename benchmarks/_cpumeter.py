"""CPU time of this process and of everything it starts, from a cgroup put around it.

Shared by the benchmarks (``python benchmarks/<name>.py`` puts this folder on ``sys.path``).
Root only; elsewhere :meth:`CpuMeter.seconds` is ``None``. Run cgroups the local sandbox makes
are nested under the caller's own (cgroup v1), so their runs count too; kernel threads (a
network namespace is torn down by one) do not.
"""

from __future__ import annotations

import os


class CpuMeter:
    """CPU seconds used by this process and everything it starts, from a cgroup around it."""

    def __init__(self) -> None:
        self.path: str | None = None
        self._home: str | None = None
        v1 = "/sys/fs/cgroup/cpuacct"
        try:
            if os.path.isdir(v1):
                with open("/proc/self/cgroup") as f:
                    rel = next(
                        line.split(":", 2)[2].strip()
                        for line in f
                        if "cpuacct" in line.split(":", 2)[1].split(",")
                    )
                self._home = os.path.join(v1, rel.lstrip("/"))
                self.path = os.path.join(v1, f"llmgym-bench-{os.getpid()}")
                self._file = "cpuacct.usage"
            elif os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
                with open("/proc/self/cgroup") as f:
                    rel = next(
                        line.split(":", 2)[2].strip() for line in f if line.startswith("0::")
                    )
                self._home = os.path.join("/sys/fs/cgroup", rel.lstrip("/"))
                self.path = f"/sys/fs/cgroup/llmgym-bench-{os.getpid()}"
                self._file = "cpu.stat"
            else:
                return
            os.makedirs(self.path, exist_ok=True)
            with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        except (OSError, StopIteration):
            self.close()

    def seconds(self) -> float | None:
        if self.path is None:
            return None
        return cgroup_cpu(self.path)

    def close(self) -> None:
        if self.path is None:
            return
        try:
            if self._home is not None:
                with open(os.path.join(self._home, "cgroup.procs"), "w") as f:
                    f.write(str(os.getpid()))
            os.rmdir(self.path)
        except OSError:
            pass
        self.path = None


def cgroup_cpu(path: str) -> float | None:
    try:
        if os.path.exists(os.path.join(path, "cpuacct.usage")):
            with open(os.path.join(path, "cpuacct.usage")) as f:
                return int(f.read()) / 1e9
        with open(os.path.join(path, "cpu.stat")) as f:
            for line in f:
                key, value = line.split()
                if key == "usage_usec":
                    return int(value) / 1e6
    except (OSError, ValueError):
        pass
    return None

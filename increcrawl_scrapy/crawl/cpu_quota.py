"""The cores a CPU quota gives this process (Linux cgroups: ``docker --cpus``,
Kubernetes CPU limits), which its affinity does not show: in a container limited to
one core's time the process may still run on every core, and ``auto`` started a
content worker there that only took turns with the crawl for the one core's time.
v2 (``cpu.max``) and v1 (``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``), the
process's own cgroup and every one above it (the tightest counts)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path


def quota_cores(proc: str = "/proc/self/cgroup", root: str = "/sys/fs/cgroup") -> float | None:
    """The cores' worth of time the process's cgroups allow (None: no quota)."""
    quotas: list[float] = []
    with contextlib.suppress(OSError):
        for line in Path(proc).read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if controllers == "":  # v2: one hierarchy
                quotas += _each_up(Path(root), path, _v2)
            elif "cpu" in controllers.split(","):
                quotas += _each_up(Path(root) / controllers, path, _v1)
    return min(quotas, default=None)


def _each_up(base: Path, path: str, read: Callable[[Path], float | None]) -> list[float]:
    """*read* of the cgroup at *path* under *base* and of each one above it."""
    parts = [part for part in path.split("/") if part]
    found = []
    for depth in range(len(parts), -1, -1):
        with contextlib.suppress(OSError, ValueError):
            value = read(base.joinpath(*parts[:depth]))
            if value is not None:
                found.append(value)
    return found


def _v2(folder: Path) -> float | None:
    quota, period = (folder / "cpu.max").read_text().split()
    return None if quota == "max" else int(quota) / int(period)


def _v1(folder: Path) -> float | None:
    quota = int((folder / "cpu.cfs_quota_us").read_text())
    return None if quota <= 0 else quota / int((folder / "cpu.cfs_period_us").read_text())

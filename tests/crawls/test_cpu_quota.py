"""The cores a CPU quota gives (``crawl/cpu_quota.py``): ``auto`` chooses a content
worker only where a second core's time is there, and a container limited to one
core's time (``docker --cpus=1``) may still run on every core by its affinity."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from increcrawl_scrapy.crawl.cpu_quota import quota_cores


def _tree(tmp_path: Path, proc: str, files: dict[str, str]) -> tuple[str, str]:
    (tmp_path / "cgroup").write_text(proc)
    for name, text in files.items():
        (tmp_path / "sys" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "sys" / name).write_text(text)
    return str(tmp_path / "cgroup"), str(tmp_path / "sys")


def test_a_v2_quota_of_the_cgroup_or_one_above_it(tmp_path: Path) -> None:
    proc, root = _tree(
        tmp_path,
        "0::/jobs/crawl\n",
        {"jobs/crawl/cpu.max": "max 100000\n", "jobs/cpu.max": "150000 100000\n"},
    )
    assert quota_cores(proc, root) == 1.5
    proc, root = _tree(tmp_path, "0::/\n", {"cpu.max": "max 100000\n"})
    assert quota_cores(proc, root) is None


def test_a_v1_quota(tmp_path: Path) -> None:
    files = {"cpu,cpuacct/docker/x/cpu.cfs_quota_us": "100000\n"}
    files["cpu,cpuacct/docker/x/cpu.cfs_period_us"] = "100000\n"
    files["cpu,cpuacct/cpu.cfs_quota_us"] = "-1\n"
    files["cpu,cpuacct/cpu.cfs_period_us"] = "100000\n"
    proc, root = _tree(tmp_path, "4:memory:/docker/x\n3:cpu,cpuacct:/docker/x\n", files)
    assert quota_cores(proc, root) == 1.0


def test_no_cgroups_no_quota(tmp_path: Path) -> None:
    assert quota_cores(str(tmp_path / "none"), str(tmp_path)) is None


def test_a_process_in_a_cgroup_of_one_cores_time_counts_one_core() -> None:
    # A real cgroup (v1's cpu controller, as on this machine's kind), made for the
    # test and removed after: the process the quota applies to counts one core.
    base = Path("/sys/fs/cgroup/cpu")
    if not (base / "cpu.cfs_quota_us").exists() or not os.access(base, os.W_OK):
        pytest.skip("no writable cgroup v1 cpu controller here")
    group = base / f"increcrawl-test-{uuid.uuid4().hex[:8]}"
    group.mkdir()
    try:
        (group / "cpu.cfs_period_us").write_text("100000")
        (group / "cpu.cfs_quota_us").write_text("100000")
        code = (
            "import os, sys; open(sys.argv[1], 'w').write(str(os.getpid()));"
            "from increcrawl_scrapy.crawl.content_processes import available_cores;"
            "print(available_cores())"
        )
        done = subprocess.run(
            [sys.executable, "-c", code, str(group / "cgroup.procs")],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        assert done.stdout.split() == ["1"], done.stderr
    finally:
        group.rmdir()

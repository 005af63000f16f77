"""CPU-seconds of a command and of every process it starts, Ray's included.

A job's Ray workers are the raylet's children, not the driver's: a whole-process counter
of the driver (/usr/bin/time, getrusage) sees only the processes it waited for, about a
third of a Ray job's CPU. Two ways count them all:

- `cgroup` (preferred; root on cgroup v1 `cpuacct` or v2 `cpu`): the command starts in a
  fresh cgroup, which every process it starts inherits, and the cgroup's usage counter is
  read when the last of them is gone;
- `tree` (anywhere): the command's process tree is polled every POLL seconds, each
  process's own user+system time is kept at its last reading, and the sum is taken at the
  end (a process's last POLL seconds before it exits are missed: a lower bound).

    python tests/benchmarks/process_cpu.py [--method cgroup|tree] -- COMMAND...

prints one JSON line: {"method", "cpu_s", "user_s", "system_s", "wall_s", "rc"}.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

POLL = 0.1
CGROUP_V1 = Path("/sys/fs/cgroup/cpuacct")
CGROUP_V2 = Path("/sys/fs/cgroup/unified")


def cgroup_root() -> tuple[Path, str] | None:
    """(the hierarchy a new cgroup can be made in, its version), or None."""
    for root, version in ((CGROUP_V1, "v1"), (CGROUP_V2, "v2")):
        probe = root / f"probe-{uuid.uuid4().hex[:8]}"
        try:
            probe.mkdir()
        except OSError:
            continue
        usable = (probe / ("cpuacct.usage" if version == "v1" else "cpu.stat")).exists()
        probe.rmdir()
        if usable:
            return root, version
    return None


def _usage(group: Path, version: str) -> tuple[float, float, float]:
    """(cpu, user, system) seconds of the cgroup."""
    if version == "v1":
        total = int((group / "cpuacct.usage").read_text()) / 1e9
        ticks = os.sysconf("SC_CLK_TCK")
        stat = dict(line.split() for line in (group / "cpuacct.stat").read_text().splitlines())
        return total, int(stat["user"]) / ticks, int(stat["system"]) / ticks
    stat = dict(line.split() for line in (group / "cpu.stat").read_text().splitlines())
    return (
        int(stat["usage_usec"]) / 1e6,
        int(stat["user_usec"]) / 1e6,
        int(stat["system_usec"]) / 1e6,
    )


def _members(group: Path) -> list[int]:
    return [int(p) for p in (group / "cgroup.procs").read_text().split()]


def run_in_cgroup(command: list[str], env=None, cwd=None, linger: float = 30.0) -> dict:
    found = cgroup_root()
    if found is None:
        raise RuntimeError("no cgroup can be made here: use method='tree'")
    root, version = found
    group = root / f"bench-{uuid.uuid4().hex[:12]}"
    group.mkdir()
    procs = str(group / "cgroup.procs")
    started = time.monotonic()
    try:
        # The child joins the cgroup before it runs the command: all it starts inherits it.
        child = subprocess.Popen(
            command,
            env=env,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=lambda: Path(procs).write_text(str(os.getpid())),
        )
        rc = child.wait()
        wall = time.monotonic() - started
        deadline = time.monotonic() + linger  # Ray's daemons exit just after the driver
        while _members(group) and time.monotonic() < deadline:
            time.sleep(0.1)
        for pid in _members(group):  # what outlived the linger is killed, and still counted
            with _gone():
                os.kill(pid, 9)
        while _members(group):
            time.sleep(0.05)
        cpu, user, system = _usage(group, version)
    finally:
        with _gone():
            group.rmdir()
    return {
        "method": f"cgroup {version}",
        "cpu_s": cpu,
        "user_s": user,
        "system_s": system,
        "wall_s": wall,
        "rc": rc,
    }


def run_polling_tree(command: list[str], env=None, cwd=None, linger: float = 30.0) -> dict:
    psutil = _psutil()
    seen: dict[tuple[int, float], tuple[float, float]] = {}
    names: dict[tuple[int, float], str] = {}  # each process's busiest title seen
    started = time.monotonic()
    child = subprocess.Popen(command, env=env, cwd=cwd, start_new_session=True)
    root = psutil.Process(child.pid)
    session = os.getsid(child.pid)

    def poll() -> list:
        alive = []
        # Ray's daemons may be reparented when the driver exits: the session finds them.
        procs = {root, *_descendants(root)} | {
            p for p in psutil.process_iter() if _session(p) == session
        }
        for proc in procs:
            try:
                times = proc.cpu_times()
                key = (proc.pid, proc.create_time())
                seen[key] = (times.user, times.system)
                names[key] = _title(proc, names.get(key))
                alive.append(proc)
            except psutil.Error:
                continue
        return alive

    while child.poll() is None:
        poll()
        time.sleep(POLL)
    wall = time.monotonic() - started
    deadline = time.monotonic() + linger
    while [p for p in poll() if p.pid != child.pid] and time.monotonic() < deadline:
        time.sleep(POLL)
    user = sum(u for u, _ in seen.values())
    system = sum(s for _, s in seen.values())
    by_process: dict[str, float] = {}
    for key, (u, s) in seen.items():
        by_process[names[key]] = round(by_process.get(names[key], 0.0) + u + s, 2)
    by_process = dict(sorted(by_process.items(), key=lambda item: -item[1]))
    return {
        "method": "tree",
        "cpu_s": user + system,
        "user_s": user,
        "system_s": system,
        "wall_s": wall,
        "rc": child.returncode,
        "by_process": by_process,
    }


def _psutil():
    """psutil: installed, or the copy Ray vendors (importing ray puts it on the path)."""
    try:
        import psutil
    except ImportError:
        __import__("ray")  # its vendored psutil goes on the path
        import psutil
    return psutil


def _title(proc, before: str | None) -> str:
    """A short name of the process: a Ray worker's title says what it runs
    (ray::MapWorker(...), ray::IDLE), and the first one other than IDLE is kept."""
    try:
        line = " ".join(proc.cmdline())
    except Exception:  # noqa: BLE001 - gone meanwhile
        return before or "?"
    if before and before.startswith("ray::") and not before.startswith("ray::IDLE"):
        return before
    if line.startswith("ray::"):
        return line.split(" ")[0][:60]
    words = [w for w in line.split() if not w.startswith("-")]
    return " ".join(Path(w).name for w in words[:3])[:60] or before or "?"


def _descendants(proc):
    try:
        return proc.children(recursive=True)
    except _psutil().Error:
        return []


def _session(proc) -> int | None:
    try:
        return os.getsid(proc.pid)
    except OSError:
        return None


class _gone:
    """Ignores a process or cgroup that vanished meanwhile."""

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        return kind is not None and issubclass(
            kind, (ProcessLookupError, FileNotFoundError, OSError)
        )


def measure(command: list[str], method: str | None = None, env=None, cwd=None) -> dict:
    """CPU-seconds of `command` and all it starts: by cgroup where one can be made, else by
    polling its process tree (or as `method` says)."""
    method = method or ("cgroup" if cgroup_root() else "tree")
    run = run_in_cgroup if method == "cgroup" else run_polling_tree
    return run(command, env=env, cwd=cwd)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--method", choices=("cgroup", "tree"))
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    print(json.dumps(measure(command, args.method)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What real jobs *use*, measured: CPU time and resident memory of their task processes, and the
parameter-server traffic their workers move (as opposed to what the ledger *allocated*).

:class:`UsageMeter` reads each task process's CPU time (``utime + stime`` in
``/proc/<pid>/stat``) and resident set (``/proc/<pid>/statm``) whenever the backend hears
from that task, and, when the backend asks, turns what was read since the job's last sample
into one ``USED`` backend event over that interval:

* ``cpu``: CPU seconds the job's processes spent / wall seconds (cores busy on average);
* ``mem_gb``: the processes' resident memory at the newest reading (GB);
* ``net_gbps``: for parameter-server jobs, the traffic their bytes put on node links, in
  Gbit/s: every PS byte goes between a worker and a server, and one between two nodes
  leaves one node's link and enters the other's (each node's bandwidth budget is charged
  for both directions), so twice the bytes per second the workers exchange with servers
  on other nodes (``net_remote_bytes_s``); traffic within a node uses no link.

A process shared by several jobs (a pack host, :mod:`.packed`) is split evenly between them.
A process this machine cannot read (``/proc`` missing, a Ray actor on another machine) adds
nothing; if no process of a job can be read, ``cpu`` and ``mem_gb`` are left out of its
samples (unknown, not zero). The first reading of a process (at launch, or the first time
the backend hears from it) is its baseline: CPU it spent before (a warm spare's imports)
is not the job's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..engine.backend import BackendEvent, BackendEventKind

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def read_proc(pid: int) -> tuple[float, float] | None:
    """(CPU seconds, resident GB) of process ``pid`` from ``/proc``; None if it cannot be read.

    A process that exited but was not reaped yet (a zombie) still shows its CPU time and no
    resident memory."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        with open(f"/proc/{pid}/statm") as f:
            pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    fields = stat[stat.rfind(")") + 2:].split()  # after "pid (comm) ": state is field 3 of stat(5)
    try:
        cpu = (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime: fields 14, 15
    except (ValueError, IndexError):
        return None
    return cpu, pages * _PAGE / 2**30


@dataclass
class _Proc:
    base_cpu: float  # CPU seconds at the job's last sample
    cpu: float  # CPU seconds at the newest reading
    rss_gb: float  # resident GB at the newest reading with the process alive


@dataclass
class _Job:
    since: float  # start of the interval not yet sampled
    procs: dict[int, _Proc] = field(default_factory=dict)
    net_bytes_s: dict[int, float] = field(default_factory=dict)  # worker rank -> newest rate


class UsageMeter:
    """Per-job measurement of real use (see the module doc). Times are the backend's clock."""

    def __init__(self) -> None:
        self._jobs: dict[str, _Job] = {}
        self._sharing: dict[int, set[str]] = {}  # pid -> jobs whose tasks run in it
        # pid -> (time, reading): a process shared by several jobs is read once per instant, so
        # that its sharers split one reading rather than readings a clock tick apart
        self._latest: dict[int, tuple[float, tuple[float, float] | None]] = {}

    def start(self, job: str, pids: list[int], now: float) -> None:
        """A (re)launch of ``job`` on processes ``pids``: forget its old processes, baseline these."""
        self.forget(job)
        for pid in pids:
            self.read(job, pid, now)

    def read(self, job: str, pid: int, now: float) -> None:
        """Take a reading of ``pid``, a process of ``job`` (the first one is its baseline; a job
        first heard of now, e.g. a pack member, is measured from ``now``)."""
        acc = self._jobs.get(job)
        if acc is None:
            acc = self._jobs[job] = _Job(since=now)
        cached = self._latest.get(pid)
        if cached is not None and cached[0] == now:
            got = cached[1]
        else:
            got = read_proc(pid)
            self._latest[pid] = (now, got)
        if got is None:
            return
        cpu, rss = got
        p = acc.procs.get(pid)
        if p is None:
            acc.procs[pid] = _Proc(cpu, cpu, rss)
            self._sharing.setdefault(pid, set()).add(job)
            return
        p.cpu = max(p.cpu, cpu)
        if rss > 0:  # a zombie shows no resident memory: keep the last living reading
            p.rss_gb = rss

    def net(self, job: str, rank: int, bytes_per_s: float, now: float) -> None:
        """The newest rate of PS bytes worker ``rank`` exchanges with servers on other nodes."""
        acc = self._jobs.get(job)
        if acc is None:
            acc = self._jobs[job] = _Job(since=now)
        acc.net_bytes_s[rank] = float(bytes_per_s)

    def sample(self, job: str, now: float) -> BackendEvent | None:
        """A ``USED`` event for ``job`` over [its last sample, ``now``] (None for an empty interval)."""
        acc = self._jobs.get(job)
        if acc is None or now <= acc.since:
            return None
        span = now - acc.since
        used: dict[str, float] = {}
        if acc.procs:
            cpu = mem = 0.0
            for pid, p in acc.procs.items():
                share = 1.0 / max(len(self._sharing.get(pid, ())), 1)
                cpu += (p.cpu - p.base_cpu) * share
                mem += p.rss_gb * share
                p.base_cpu = p.cpu
            used["cpu"] = cpu / span
            used["mem_gb"] = mem
        if acc.net_bytes_s:
            used["net_gbps"] = 2 * sum(acc.net_bytes_s.values()) * 8e-9  # out of one node, into another
        ev = BackendEvent(now, BackendEventKind.USED, job, {"used": used, "since": acc.since, "until": now})
        acc.since = now
        return ev if used else None

    def forget(self, job: str) -> None:
        """Stop measuring ``job`` (it ended or was halted, after its last sample)."""
        acc = self._jobs.pop(job, None)
        if acc is None:
            return
        for pid in acc.procs:
            users = self._sharing.get(pid)
            if users is not None:
                users.discard(job)
                if not users:
                    del self._sharing[pid]
                    self._latest.pop(pid, None)

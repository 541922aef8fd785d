"""One node's subtask executor (Lee et al., §IV-A, Fig. 7 right): a CPU queue, a network queue and its link.

* **CPU queue**: one COMP subtask runs at a time ("a single CPU subtask usually
  uses almost all of the provided CPU resources").
* **Network queue**: a *primary* COMM subtask and a *secondary* one run at the
  same time (a single PULL/PUSH leaves the network idle while servers handle
  its requests). When the primary ends, the secondary becomes primary.
* Subtasks start in the order of their global release number (:mod:`.sync`),
  lowest first, so co-located jobs interleave in the same order on every node.
  A released subtask is *expected* on its worker's node until the worker asks
  for it (the worker may still be deserialising); a later-released subtask of
  the same queue waits behind it. The network queue keeps this order strictly:
  a COMM subtask of a BSP job can wait inside itself for the job's other workers
  (a PUSH waits for the servers' ack, which needs every worker's push), so if two
  nodes admitted COMM subtasks in different orders, each could fill its slots
  with subtasks whose partners wait for a slot on the other node: a deadlock.
  With one order everywhere the earliest-released COMM subtask is always
  admitted on every node. The CPU queue (COMP has no such wait) holds for at
  most ``hold_s``, then lets a later subtask go first, so a worker busy
  elsewhere does not idle a node's CPU for long. Until one of the job's workers
  asks, an expected subtask's kind is unknown and it holds both queues.
* **Link** (:class:`NodeLink`): the node's network budget as a token bucket that
  COMM subtasks draw bytes from. It is how the secondary *yields*: a primary
  always draws first; the secondary draws only while no primary is waiting for
  bytes, i.e. it uses exactly the bandwidth the primary leaves idle. Clients that
  are not in a Harmony group (isolated / naive jobs) draw with equal priority.

State only; the server (:mod:`.server`) calls these methods under its lock and
waits on its condition variable.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from ..subtask import SubtaskKind


@dataclass(eq=False)
class Ticket:
    """One subtask of one worker on a node: waiting, then running in a role."""

    job: str
    rank: int
    kind: SubtaskKind
    seq: int
    role: str = ""  # "" waiting, "cpu", "primary" or "secondary"


@dataclass(eq=False)
class Expected:
    """A released subtask its worker has not asked for yet; ``comm`` is None until its kind is known."""

    job: str
    rank: int
    seq: int
    since: float
    comm: bool | None = None


@dataclass
class Busy:
    """Seconds a resource had at least one subtask running (measured utilisation)."""

    seconds: float = 0.0
    since: float | None = None

    def set(self, busy: bool, now: float) -> None:
        if busy and self.since is None:
            self.since = now
        elif not busy and self.since is not None:
            self.seconds += now - self.since
            self.since = None

    def total(self, now: float) -> float:
        return self.seconds + (now - self.since if self.since is not None else 0.0)


@dataclass
class NodeQueues:
    """CPU and network queues of one logical node."""

    node: int
    hold_s: float = 0.05
    waiting: list[Ticket] = field(default_factory=list)
    expected: dict[tuple[str, int], Expected] = field(default_factory=dict)
    cpu: Ticket | None = None
    primary: Ticket | None = None
    secondary: Ticket | None = None
    cpu_busy: Busy = field(default_factory=Busy)
    net_busy: Busy = field(default_factory=Busy)
    both_busy: Busy = field(default_factory=Busy)
    started: dict[str, int] = field(default_factory=lambda: {"comp": 0, "comm": 0, "secondary": 0})
    order: list[tuple[str, str]] = field(default_factory=list)  # (job, kind) in start order, for tests

    def expect(self, job: str, rank: int, seq: int, now: float) -> None:
        """Subtask ``seq`` of ``job`` was released to worker ``rank`` of this node."""
        self.expected[(job, rank)] = Expected(job, rank, seq, now)

    def learn_kind(self, job: str, seq: int, comm: bool) -> None:
        """A worker of ``job`` asked for subtask ``seq``: its kind is now known on every node."""
        for e in self.expected.values():
            if e.job == job and e.seq == seq:
                e.comm = comm

    def forget(self, job: str, rank: int) -> None:
        """Worker ``rank`` of ``job`` left: nothing of it is expected any more."""
        self.expected.pop((job, rank), None)

    def hold(self, t: Ticket, now: float) -> float:
        """Seconds ``t`` must still wait for an earlier-released subtask of its queue that has not arrived
        (``inf`` for a COMM subtask: the network queue keeps the release order strictly, see the module
        docstring)."""
        comm = t.kind.is_comm
        waits = [e.since + self.hold_s - now for e in self.expected.values() if e.seq < t.seq and e.comm in (None, comm)]
        if comm and waits:
            return math.inf
        return max(waits, default=0.0)

    def enqueue(self, t: Ticket) -> None:
        self.expected.pop((t.job, t.rank), None)
        self.waiting.append(t)

    def try_start(self, t: Ticket, now: float) -> bool:
        """Start ``t`` if its queue has a free slot and no earlier-released subtask of its queue waits
        (queued, or expected within ``hold_s``)."""
        comm = t.kind.is_comm
        if self.hold(t, now) > 0:
            return False
        if comm and self.primary is not None and self.secondary is not None:
            return False
        if not comm and self.cpu is not None:
            return False
        first = min((w for w in self.waiting if w.kind.is_comm == comm), key=lambda w: w.seq)
        if first is not t:
            return False
        self.waiting.remove(t)
        if not comm:
            t.role, self.cpu = "cpu", t
            self.started["comp"] += 1
        elif self.primary is None:
            t.role, self.primary = "primary", t
            self.started["comm"] += 1
        else:
            t.role, self.secondary = "secondary", t
            self.started["comm"] += 1
            self.started["secondary"] += 1
        self.order.append((t.job, t.kind.value))
        self._account()
        return True

    def finish(self, t: Ticket) -> None:
        """``t`` ended (or its worker left): free its slot; a secondary moves up to primary."""
        if t in self.waiting:
            self.waiting.remove(t)
        elif t is self.cpu:
            self.cpu = None
        elif t is self.primary:
            self.primary, self.secondary = self.secondary, None
            if self.primary is not None:
                self.primary.role = "primary"
        elif t is self.secondary:
            self.secondary = None
        t.role = "done"
        self._account()

    def _account(self) -> None:
        now = time.monotonic()
        self.cpu_busy.set(self.cpu is not None, now)
        self.net_busy.set(self.primary is not None, now)
        self.both_busy.set(self.cpu is not None and self.primary is not None, now)

    def stats(self) -> dict[str, float | int | list[str]]:
        now = time.monotonic()
        return {"cpu_busy_s": self.cpu_busy.total(now), "net_busy_s": self.net_busy.total(now),
                "overlap_s": self.both_busy.total(now), **self.started, "order": ["/".join(o) for o in self.order]}


class NodeLink:
    """A node's network budget: ``rate`` bytes/s, a bucket of ``burst`` bytes (default 0: like a NIC,
    never faster than ``rate``), primary draws first.

    A draw of ``n`` bytes is granted when the bucket is not in debt and (for a
    low-priority draw) no high-priority draw waits and the last high-priority
    bytes went through more than ``grace_s`` ago (a primary's flow is continuous
    on a real link; here it draws chunk by chunk, with a round trip between
    chunks that a secondary must not take for idleness); it then takes ``n`` bytes,
    possibly into debt, and its caller returns once the debt is paid (its bytes
    went through). So a link delivers ``rate`` bytes/s in the long run whatever
    the chunk sizes, and a low-priority chunk delays a primary by at most one chunk.
    """

    def __init__(self, rate: float, burst: float = 0.0, grace_s: float = 0.005) -> None:
        if not rate > 0:
            raise ValueError(f"link rate must be > 0 bytes/s, got {rate!r}")
        if grace_s < 0:
            raise ValueError(f"grace_s must be >= 0, got {grace_s!r}")
        self.rate = float(rate)
        self.grace_s = float(grace_s)
        self.high_until = 0.0  # the secondary may draw again from then on
        self.burst = float(burst)
        self.tokens = self.burst
        self._last = time.monotonic()
        self.high_waiting = 0
        self.bytes = 0
        self.bytes_low = 0
        self.timed: dict[bool, list[float]] = {True: [0, 0.0], False: [0, 0.0]}
        """Per priority at the start of a draw (True: primary or link-only): [bytes, seconds callers spent
        drawing them] (the transfer rate each priority got, see ``HarmonyState.take``)."""

    def _refill(self, now: float) -> None:
        self.tokens = min(self.burst, self.tokens + (now - self._last) * self.rate)
        self._last = now

    def try_take(self, n: int, high: bool) -> float | None:
        """Seconds to wait before trying again (a float > 0), or None: ``n`` bytes were taken now.

        Once taken, the caller's bytes are through the link after :meth:`drain_time`.
        """
        now = time.monotonic()
        self._refill(now)
        if not high and (self.high_waiting or now < self.high_until):
            return max(-self.tokens / self.rate, self.high_until - now, 0.0005)
        if self.tokens < 0:
            return -self.tokens / self.rate
        self.tokens -= n
        if high:
            self.high_until = now + self.drain_time() + self.grace_s
        self.bytes += n
        if not high:
            self.bytes_low += n
        return None

    def drain_time(self) -> float:
        """Seconds until the bytes taken so far have gone through the link."""
        return max(-self.tokens / self.rate, 0.0)

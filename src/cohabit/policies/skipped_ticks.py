"""The scheduler's periodic ticks, minus the ones a policy knows would plan nothing (issue 18).

A policy with ``tick_interval = T`` is asked to decide at ``T`` after every decision (the engine's
loop: ``next_tick = now + T * 2 ** min(max(idle_ticks - IDLE_TICKS, 0), 60)``, where ``idle_ticks``
counts the decisions in a row that planned nothing while nothing waited). Most of those ticks find
nothing to do on a long queue (Gandiva's time slices end once a minute, at most). A policy that can
tell, from its own state, that a tick would plan nothing and change nothing can instead leave
``tick_interval`` unset and name the first tick that may matter as its ``next_decision_time()``:
:class:`SkippedTicks` replays the engine's tick arithmetic (the same floating-point additions, the
same idle count) so that every decision it asks for falls on the very instant the tick would have,
and the skipped ticks are exactly the quiet ones. The schedule is then the same; only the record
holds fewer ``decision`` events.
"""

from __future__ import annotations

from collections.abc import Callable

from ..engine.loop import IDLE_TICKS
from ..engine.view import ClusterView


class SkippedTicks:
    """Tick bookkeeping for one policy: call :meth:`decided` at the start of every ``decide`` and
    :meth:`planned` at its end; :meth:`wake` is the policy's ``next_decision_time()``."""

    def __init__(self, tick: float) -> None:
        self.tick = float(tick)
        self._view: ClusterView | None = None
        self._at = 0.0  # time of the last decision
        self._planned = False  # the last decision's plan was not empty
        self._idle = 0  # the engine's idle_ticks before the last decision
        self._decisions = 0
        # after the last decision: (its count, the first tick after it, idle_ticks after it, nothing waited)
        self._next: tuple[int, float, int, bool] | None = None

    def _factor(self, idle: int) -> float:
        return 2.0 ** min(max(idle - IDLE_TICKS, 0), 60)

    def _after_last(self) -> tuple[float, int, bool]:
        """The first tick after the last decision, the engine's idle count after it, and whether nothing
        waited then (read after the plan was applied: the engine asks ``next_decision_time`` then)."""
        nxt = self._next
        if nxt is not None and nxt[0] == self._decisions:
            return nxt[1], nxt[2], nxt[3]
        view = self._view
        assert view is not None
        empty = not view.pending and not view.paused
        idle = self._idle + 1 if (not self._planned and empty) else 0
        x = self._at + self.tick * self._factor(idle)
        self._next = (self._decisions, x, idle, empty)
        return x, idle, empty

    def decided(self, view: ClusterView) -> None:
        """A decision at ``view.now``: account for the ticks skipped since the last one (each a quiet
        decision of the engine: the idle count moves as it would have)."""
        if self._view is not None:
            nxt = self._next
            if nxt is None or nxt[0] != self._decisions:
                # the engine never asked for the next decision: nothing was active after the last one, so it
                # set no tick (nothing pending or paused: the idle count moved as for an empty plan)
                self._idle = self._idle + 1 if not self._planned else 0
            else:
                _, x, idle, empty = nxt
                now = view.now
                if x < now:  # ticks before this turn were skipped (quiet): each is a decision with no plan
                    if not empty:
                        idle = 0
                    else:
                        while x < now:
                            idle += 1
                            x = x + self.tick * self._factor(idle)
                self._idle = idle
        self._view = view
        self._at = view.now
        self._decisions += 1

    def planned(self, plan_not_empty: bool) -> None:
        self._planned = plan_not_empty

    def wake(self, quiet_at: Callable[[float], bool], forever: Callable[[], bool]) -> float | None:
        """The first tick after the last decision at which the policy's round is not known quiet
        (``quiet_at(t)`` false), or None when every later tick is (``forever()``, asked once the first one
        is quiet). After a non-empty plan the next tick is always taken (the policy reconciles it)."""
        if self._view is None:
            return None
        x, idle, empty = self._after_last()
        if self._planned:
            return x
        while quiet_at(x):
            if forever():
                return None
            idle = idle + 1 if empty else 0
            x = x + self.tick * self._factor(idle)
        return x

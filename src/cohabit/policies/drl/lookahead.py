"""The ``look`` rule of the task-by-task loop (:mod:`.taskwise`): once a job's tasks are all drawn (and
the :mod:`.hold` rule has had its say), the learned reward model (§VI, :class:`.nets.RewardNet`) rates
the chooser's placement against every other placement of the job on as many servers, and the job
takes the one under which the predicted speeds of all placed jobs sum highest (ours, session drl19a).

Why (``docs/drl.md``, "Session drl19a"): with the hold rule on, the largest part of drl's JCT above the
solo bound on the 6-server Poisson workloads is co-location (jobs slower than alone because of other
jobs on their servers), most of it 3-GPU jobs, which must span two servers and so share one. The
chooser (the actor or LIF-Line) picks task by task and never compares whole placements; this rule
does, with a look-ahead the LIF rules cannot express: what the placement does to the speed of *every*
job it sits beside, as the reward model (trained on sampled placements) predicts it.

Candidates (:func:`candidates`): every set of ``span`` servers (the chooser's span, at most the hold
rule's minimum when the hold is on) and every count of workers and parameter servers per server on
them that fits the room free before the job's tasks (declared demands), at most :data:`LIMIT` in all
(else the chooser's placement is kept). The placement changes only when another is predicted better
by more than ``margin`` (a share of the sum). Everything it reads is observable: the jobs' declared
models, shapes and demands, the placement state, and the shipped reward model (``data/drl/reward.pt``).
"""

from __future__ import annotations

from itertools import combinations, product
from pathlib import Path
from typing import Any

import numpy as np

from .layout import _counts
from .state import JobEntry, PlacementState, reward_token

LOOKS = ("off", "reward")

#: at most this many candidate placements are rated per job
LIMIT = 512

#: ``look=auto`` per number of servers (a size not named: ``off``)
AUTO: dict[int, str] = {}


def check_look(value: str, allow_auto: bool = False) -> str:
    allowed = LOOKS + (("auto",) if allow_auto else ())
    if value not in allowed:
        raise ValueError(f"look must be one of {', '.join(allowed)}, got {value!r}")
    return value


def look_for(value: str, m: int) -> str:
    """The rule ``value`` means on ``m`` servers (``auto``: :data:`AUTO`'s, else ``off``)."""
    return AUTO.get(m, "off") if value == "auto" else value


_NETS: dict[Path, Any] = {}

#: the shipped reward model per number of servers
SHIPPED = {6: "reward.pt", 30: "reward-30.pt"}


def shipped_reward(m: int) -> Path:
    """The shipped reward model for ``m`` servers (``data/drl``)."""
    from importlib import resources as ilr

    if m not in SHIPPED:
        raise ValueError(f"look=reward: no reward model is shipped for {m} servers (only {sorted(SHIPPED)})")
    return Path(str(ilr.files("cohabit.data").joinpath("drl", SHIPPED[m])))


def reward_net(path: Path) -> Any:
    """The reward model stored at ``path`` (cached per process)."""
    if path not in _NETS:
        import torch

        from .nets import RewardNet

        sd = torch.load(path, map_location="cpu", weights_only=True)
        m = (sd["embed.0.weight"].shape[1] - 12) // 2
        net = RewardNet(m)
        net.load_state_dict(sd)
        net.eval()
        _NETS[path] = net
    return _NETS[path]


Layout = tuple[np.ndarray, np.ndarray]  # workers, parameter servers per server (length M)


def candidates(state: PlacementState, entry: JobEntry) -> list[Layout]:
    """Every placement of ``entry`` on as many servers as its tasks now span that fits the room free
    before them (the current one first); only the current one when there are more than :data:`LIMIT`."""
    m = state.m
    cur = (entry.placed_w.astype(np.int64).copy(), entry.placed_p.astype(np.int64).copy())
    k = int(((cur[0] + cur[1]) > 0).sum())
    free = state.free + np.outer(entry.placed_w, entry.worker_demand) + np.outer(entry.placed_p, entry.ps_demand)
    wd, pd = entry.worker_demand, entry.ps_demand
    n_ps = 0 if entry.allreduce else entry.n_ps
    out: list[Layout] = [cur]
    busy = np.zeros(m, dtype=bool)
    for j in state.jobs:
        if j is not entry:
            busy |= (j.placed_w + j.placed_p) > 0
    idle_used = int((~busy[(cur[0] + cur[1]) > 0]).sum())
    for servers in combinations(range(m), k):
        s = list(servers)
        if int((~busy[s]).sum()) > idle_used:
            continue  # (no more idle servers than the chooser took: they are the room of later, larger jobs)
        wl = [w for w in _counts(entry.n_workers, [entry.n_workers] * k)]
        pl = [p for p in _counts(n_ps, [n_ps] * k)]
        for ws, ps in product(wl, pl):
            if any(w + p == 0 for w, p in zip(ws, ps)):
                continue  # (fewer servers than k: a candidate of another span)
            if not all((free[srv] + 1e-9 >= w * wd + p * pd).all() for srv, w, p in zip(s, ws, ps)):
                continue
            pw, pp = np.zeros(m, np.int64), np.zeros(m, np.int64)
            pw[s], pp[s] = ws, ps
            if not (np.array_equal(pw, cur[0]) and np.array_equal(pp, cur[1])):
                out.append((pw, pp))
            if len(out) > LIMIT:
                return [cur]
    return out


ONLY_WORKERS = 0


def rate(net: Any, state: PlacementState, entry: JobEntry, cands: list[Layout]) -> np.ndarray:
    """Per candidate, the reward model's predicted normalised speeds of every placed job (``entry`` on
    the candidate, the others as they stand) summed; one batch."""
    import torch

    others = [reward_token(j.model, j.allreduce, j.n_workers, j.n_ps, j.placed_w, j.placed_p) for j in state.jobs
              if j is not entry and (j.placed_w.sum() + j.placed_p.sum()) > 0]
    rows = [np.stack(others + [reward_token(entry.model, entry.allreduce, entry.n_workers, entry.n_ps, pw, pp)])
            for pw, pp in cands]
    x = torch.from_numpy(np.stack(rows).astype(np.float32))
    with torch.no_grad():
        pred = net(x, torch.zeros(x.shape[:2], dtype=torch.bool))
    return pred.sum(1).numpy().astype(float)


def own_speed(net: Any, state: PlacementState, entry: JobEntry) -> float:
    """The reward model's predicted normalised speed of ``entry`` as it is now placed, beside the others."""
    cur = (entry.placed_w.copy(), entry.placed_p.copy())
    return float(rate_each(net, state, entry, [cur])[0][-1])


def rate_each(net: Any, state: PlacementState, entry: JobEntry, cands: list[Layout]) -> np.ndarray:
    """Per candidate, the reward model's predicted normalised speed of every placed job (``entry`` last)."""
    import torch

    others = [reward_token(j.model, j.allreduce, j.n_workers, j.n_ps, j.placed_w, j.placed_p) for j in state.jobs
              if j is not entry and (j.placed_w.sum() + j.placed_p.sum()) > 0]
    rows = [np.stack(others + [reward_token(entry.model, entry.allreduce, entry.n_workers, entry.n_ps, pw, pp)])
            for pw, pp in cands]
    x = torch.from_numpy(np.stack(rows).astype(np.float32))
    with torch.no_grad():
        return net(x, torch.zeros(x.shape[:2], dtype=torch.bool)).numpy()


def look(state: PlacementState, entry: JobEntry, net: Any, margin: float = 0.0) -> bool:
    """Place ``entry`` again on the candidate (:func:`candidates`) rated best by :func:`rate` when it beats
    the current placement by more than ``margin`` x its rating; True if the placement changed."""
    if ONLY_WORKERS and entry.n_workers != ONLY_WORKERS:
        return False
    cands = candidates(state, entry)
    if len(cands) < 2:
        return False
    score = rate(net, state, entry, cands)
    best = int(np.argmax(score))
    if best == 0 or score[best] <= score[0] * (1.0 + margin):
        return False
    pw, pp = cands[best]
    state.undo(entry)
    for s in np.flatnonzero(pw):
        for _ in range(int(pw[s])):
            state.apply(entry, 2 * int(s))
    for s in np.flatnonzero(pp):
        for _ in range(int(pp[s])):
            state.apply(entry, 2 * int(s) + 1)
    return True

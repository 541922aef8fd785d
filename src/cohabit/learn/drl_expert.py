"""A lookahead expert for Harmony-DRL's policy, scored by the learned reward model (Bao et al.,
ToN'22, §IV offline stage: "samples expanded by the reward model"; expert iteration is ours).

:class:`LookaheadExpert` is a :data:`~cohabit.policies.drl.taskwise.Chooser`: for the next task
of a job it tries every valid action, completes the job's remaining tasks by a consolidating
rule (:func:`complete`: each task to the valid server already holding most of the job's tasks,
ties to the one with least room left), and scores each resulting cluster with the reward model
(:class:`~cohabit.policies.drl.nets.RewardNet`): the sum of the predicted normalised speeds of
every placed job, the candidate included (Eq. 1's reward for an interval, each job weighted
alike since lengths are unknown at decision time). It takes the best-scoring action. All
candidates go through the network as one batch.

It reads only the placement state (what the policy sees) and the reward model, never the
simulator's physics: a teacher for :func:`cohabit.learn.drl_dagger.dagger`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..policies.drl.state import JobEntry, PlacementState, reward_token

_EPS = 1e-9


def complete(free: np.ndarray, job: JobEntry, pw: np.ndarray, pp: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Place ``job``'s tasks not yet in ``pw``/``pp`` (workers, then parameter servers) each on the
    valid server holding most of the job's tasks, ties to the least room left (bin packing);
    ``None`` when one does not fit. ``free`` is not modified."""
    free = free.copy()
    pw, pp = pw.copy(), pp.copy()
    for is_ps, left, demand in ((False, job.n_workers - int(pw.sum()), job.worker_demand),
                                (True, job.n_ps - int(pp.sum()), job.ps_demand)):
        for _ in range(max(left, 0)):
            ok = np.flatnonzero((free + _EPS >= demand).all(axis=1))
            if ok.size == 0:
                return None
            mine = (pw + pp)[ok]
            room = free[ok].sum(axis=1)
            s = int(ok[np.lexsort((room, -mine))[0]])
            free[s] -= demand
            (pp if is_ps else pw)[s] += 1
    return pw, pp


class LookaheadExpert:
    """Chooser: the action whose completed placement the reward model scores best (module doc)."""

    def __init__(self, reward_net: Any, horizon: int = 0) -> None:
        self.net = reward_net
        self.horizon = horizon
        self.calls = 0

    def scores(self, state: PlacementState, job: JobEntry, mask: np.ndarray) -> np.ndarray:
        """Per action, the predicted sum of normalised speeds after it (``-inf`` when masked or
        when the job cannot be completed after it)."""
        import torch

        out = np.full(mask.size, -np.inf)
        others = [reward_token(j.model, j.allreduce, j.n_workers, j.n_ps, j.placed_w, j.placed_p)
                  for j in state.jobs if j is not job and j.complete and (j.placed_w.sum() + j.placed_p.sum()) > 0]
        cands: list[tuple[int, np.ndarray]] = []
        pos = state.jobs.index(job)
        later = [e for e in state.jobs[pos + 1:] if e.new][: self.horizon]
        for a in np.flatnonzero(mask):
            server, is_ps = divmod(int(a), 2)
            pw, pp = job.placed_w.copy(), job.placed_p.copy()
            free = state.free.copy()
            (pp if is_ps else pw)[server] += 1
            free[server] -= job.ps_demand if is_ps else job.worker_demand
            done = complete(free, job, pw, pp)
            if done is None:
                continue
            toks = [reward_token(job.model, job.allreduce, job.n_workers, job.n_ps, *done)]
            if later:
                free -= np.outer(done[0] - pw, job.worker_demand) + np.outer(done[1] - pp, job.ps_demand)
                for e in later:
                    got = complete(free, e, np.zeros(state.m, np.int64), np.zeros(state.m, np.int64))
                    if got is not None:
                        free -= np.outer(got[0], e.worker_demand) + np.outer(got[1], e.ps_demand)
                        toks.append(reward_token(e.model, e.allreduce, e.n_workers, e.n_ps, *got))
            cands.append((int(a), np.stack(toks)))
        if not cands:
            return out
        from ..policies.drl.nets import pad_batch

        base = np.stack(others) if others else np.zeros((0, cands[0][1].shape[1]), np.float32)
        x, pad = pad_batch([torch.from_numpy(np.concatenate((base, toks)).astype(np.float32)) for _, toks in cands],
                           base.shape[1])
        with torch.no_grad():
            pred = self.net(x, pad).masked_fill(pad, 0.0).numpy()
        self.calls += 1
        for (a, _), row in zip(cands, pred):
            out[a] = float(row.sum())
        return out

    def __call__(self, state: PlacementState, job: JobEntry, mask: np.ndarray) -> int:
        s = self.scores(state, job, mask)
        if np.isfinite(s).any():
            return int(np.argmax(s))
        # no action lets the job complete: any valid one (the job will wait, its tasks taken back)
        return int(np.flatnonzero(mask)[0])


def load_reward(path: Any, m: int) -> Any:
    """The reward network for ``m`` servers stored at ``path`` (a state dict)."""
    import torch

    from ..policies.drl.nets import RewardNet

    net = RewardNet(m)
    net.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    net.eval()
    return net

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


def take_action(state: PlacementState, job: JobEntry, a: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Action ``a`` (§V-A: ``2m`` a worker, ``2m + 1`` a PS on server ``m``) tried on copies: the
    job's worker and PS counts per server and the servers' free resources after it."""
    server, is_ps = divmod(int(a), 2)
    pw, pp = job.placed_w.copy(), job.placed_p.copy()
    free = state.free.copy()
    (pp if is_ps else pw)[server] += 1
    free[server] -= job.ps_demand if is_ps else job.worker_demand
    return pw, pp, free


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


Job = tuple[str, bool, int, int, np.ndarray, np.ndarray]  # model, all-reduce, workers, PS, per-server counts


class RewardScorer:
    """Sum of the reward model's predicted normalised speeds of each candidate's jobs (one batch)."""

    def __init__(self, net: Any) -> None:
        self.net = net

    def __call__(self, cands: list[list[Job]]) -> np.ndarray:
        import torch

        from ..policies.drl.nets import pad_batch

        seqs = [torch.from_numpy(np.stack([reward_token(*j) for j in c]).astype(np.float32)) for c in cands]
        x, pad = pad_batch(seqs, seqs[0].shape[1])
        with torch.no_grad():
            pred = self.net(x, pad).masked_fill(pad, 0.0)
        return pred.sum(1).numpy().astype(float)


class LIFScorer:
    """Sum of a LIF model's predicted normalised speeds (:mod:`cohabit.models.interference`), for
    cluster sizes without a reward model."""

    def __init__(self, model: Any, cores: float = 8.0) -> None:
        self.model, self.cores = model, cores

    def __call__(self, cands: list[list[Job]]) -> np.ndarray:
        from ..models.interference import server_features

        out = np.zeros(len(cands))
        for i, c in enumerate(cands):
            jobs = []
            for model, _, _, _, pw, pp in c:
                w = {s: int(n) for s, n in enumerate(pw) if n}
                p = {s: int(n) for s, n in enumerate(pp) if n}
                jobs.append((model, w, p, len(set(w) | set(p)) > 1))
            cores = {s: self.cores for s in range(len(c[0][4]))}
            feats = server_features(jobs, cores, self.model)
            out[i] = sum(self.model.predict_speed(j[0], list(f.values())) for j, f in zip(jobs, feats))
        return out


class LookaheadExpert:
    """Chooser: the action whose completed placement the scorer rates best (module doc).
    ``horizon``: the next waiting new jobs are also placed (by :func:`complete`) in each
    candidate before it is scored, so that a placement that leaves them no room scores less."""

    def __init__(self, scorer: Any, horizon: int = 0, tie: float = 0.0) -> None:
        self.scorer = scorer if not hasattr(scorer, "parameters") else RewardScorer(scorer)
        self.horizon = horizon
        self.tie = tie
        self.calls = 0
        self.hopeless = False  # the last call found no action after which the job can be completed
        #: ``tie > 0``: the actions of the last call scored within ``tie`` of the best (else None)
        self.good: np.ndarray | None = None

    def scores(self, state: PlacementState, job: JobEntry, mask: np.ndarray) -> np.ndarray:
        """Per action, the predicted sum of normalised speeds after it (``-inf`` when masked or
        when the job cannot be completed after it)."""
        out = np.full(mask.size, -np.inf)
        others: list[Job] = [(j.model, j.allreduce, j.n_workers, j.n_ps, j.placed_w, j.placed_p) for j in state.jobs
                             if j is not job and j.complete and (j.placed_w.sum() + j.placed_p.sum()) > 0]
        pos = state.jobs.index(job)
        later = [e for e in state.jobs[pos + 1:] if e.new][: self.horizon]
        actions: list[int] = []
        cands: list[list[Job]] = []
        for a in np.flatnonzero(mask):
            pw, pp, free = take_action(state, job, a)
            done = complete(free, job, pw, pp)
            if done is None:
                continue
            jobs = [*others, (job.model, job.allreduce, job.n_workers, job.n_ps, *done)]
            free -= np.outer(done[0] - pw, job.worker_demand) + np.outer(done[1] - pp, job.ps_demand)
            for e in later:
                got = complete(free, e, np.zeros(state.m, np.int64), np.zeros(state.m, np.int64))
                if got is not None:
                    free -= np.outer(got[0], e.worker_demand) + np.outer(got[1], e.ps_demand)
                    jobs.append((e.model, e.allreduce, e.n_workers, e.n_ps, *got))
            actions.append(int(a))
            cands.append(jobs)
        if cands:
            out[actions] = self.scorer(cands)
            self.calls += 1
        return out

    def __call__(self, state: PlacementState, job: JobEntry, mask: np.ndarray) -> int:
        s = self.scores(state, job, mask)
        self.last_scores = s
        self.hopeless = not np.isfinite(s).any()
        if not self.hopeless:
            best = int(np.argmax(s))
            self.good = (s >= s[best] - self.tie) if self.tie > 0 else None
            return best
        self.good = None
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


class LIFExpert:
    """Chooser: the LIF-Line / LIF-Quad rule (:class:`~cohabit.policies.lif_line.LIFPolicy`, ties to
    the lowest server) on 8-core servers, which also names in ``good`` the actions equivalent to
    its choice: the same kind of task (worker or parameter server) on a server in the same
    situation: the same interference score, the same free resources and the same number of the
    job's own workers and parameter servers there (e.g. any empty server, where the rule's
    lowest-index choice is arbitrary). A tie of the score alone is not enough: the rule scores a
    job's second task on an empty server like the one beside its first task, and only its
    lowest-index tie-break keeps the job together."""

    def __init__(self, kind: str = "quad", tie: float = 1e-9) -> None:
        from ..policies.lif_line import LIFPolicy

        self.rule = LIFPolicy(kind)
        self.rule._cores = {s: 8.0 for s in range(64)}
        self.tie = tie
        self.hopeless = False
        self.good: np.ndarray | None = None

    def scores(self, state: PlacementState, job: JobEntry, mask: np.ndarray) -> np.ndarray:
        """Per action, minus the rule's interference score after it (``-inf`` where masked)."""
        out = np.full(mask.size, -np.inf)
        for a in np.flatnonzero(mask):
            server, is_ps = divmod(int(a), 2)
            side = job.placed_p if is_ps else job.placed_w
            side[server] += 1
            out[a] = -self.rule.score(state, server)
            side[server] -= 1
        return out

    def __call__(self, state: PlacementState, job: JobEntry, mask: np.ndarray) -> int:
        s = self.scores(state, job, mask)
        self.last_scores = s
        best = int(np.argmax(s))  # the first maximum: the lowest server, as the rule
        srv, kind = divmod(best, 2)
        servers = np.arange(state.m)
        same = ((np.abs(state.free - state.free[srv]) <= 1e-9).all(axis=1)
                & (job.placed_w == job.placed_w[srv]) & (job.placed_p == job.placed_p[srv])
                & (s[2 * servers + kind] >= s[best] - self.tie))
        self.good = np.zeros(mask.size, dtype=bool)
        self.good[2 * servers[same] + kind] = True
        self.good &= mask
        return best

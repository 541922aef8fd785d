"""The vectorised MLF-H priorities (``PriorityTable``) equal Eq. 2-6 computed task by task,
round after round of a real run (the per-job terms it keeps must follow every report)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cohabit.engine.job import JobView
from cohabit.engine.view import ClusterView
from cohabit.policies.mlfs.heuristic import MLFH
from cohabit.policies.mlfs.priority import PriorityParams, PriorityTable, loss_reduction_share
from cohabit.sim.mlfs_workload import generate
from cohabit.sim.runner import simulate
from cohabit.spec.cluster import preset

HOUR = 3600.0


def reference(job: JobView, now: float, p: PriorityParams, fallback: float, max_deadline: float = 7 * 24 * HOUR
              ) -> np.ndarray:
    """Eq. 2-6 task by task, children before parents, as the paper writes them."""
    g = job.spec.graph
    if g is None:
        n, parts, reps = job.spec.workers.count, 1, job.spec.workers.count
        children: tuple[tuple[int, ...], ...] = ((),)
        shares = (1.0,)
        order: tuple[int, ...] = (0,)
    else:
        parts, reps = g.num_partitions, g.replicas
        n, children, shares, order = parts * reps, g.children, g.size_shares, g.layers
    height = [0] * parts
    for part in reversed(order):
        height[part] = max((height[c] + 1 for c in children[part]), default=0)
    layers = max(height) + 1
    done = job.iterations_done(now)
    it_time = job.iter_time or fallback
    total = job.spec.iterations
    rem_h = (max(total - done, 0.0) * it_time / HOUR) if total is not None else max_deadline / HOUR
    dl = job.spec.absolute_deadline
    d_job_h = (dl if dl is not None else job.spec.submit_time + max_deadline) / HOUR
    urg = job.spec.urgency if p.use_urgency else 1.0
    w_h = job.waiting_time(now) / HOUR
    pri = [0.0] * n
    for r in range(reps):
        for part in reversed(order):
            t = r * parts + part
            s = shares[part]
            ml = urg / (done + 1.0) * loss_reduction_share(job) * s  # Eq. 2
            left = max(d_job_h - rem_h * height[part] / layers - now / HOUR, 1.0 / 60.0)
            c = p.gamma_r / max(rem_h * s, 1.0 / HOUR) + p.gamma_w * w_h  # Eq. 4
            if p.use_deadline:
                c += p.gamma_d / left
            base = p.alpha * ml + (1 - p.alpha) * c  # Eq. 6
            pri[t] = base + p.gamma * sum(pri[r * parts + k] for k in children[part])  # Eq. 3, 5
    if job.spec.num_ps:
        top = max(pri) + p.gamma * sum(pri)
        pri += [top] * job.spec.num_ps
    return np.array(pri)


class Checked(MLFH):
    """MLF-H that checks the table against the reference for every live job at every round."""

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.checked = 0
        self.reported = 0
        self.single = 0

    def round(self, view: ClusterView):  # type: ignore[no-untyped-def, override]
        jobs = [*view.running.values(), *view.paused.values(), *view.pending.values()]
        keys, prs = self.priorities_of(view, jobs)
        fb = self._fallbacks(view, jobs)
        for i, job in enumerate(jobs):
            want = reference(job, view.now, self.params, fb[job.spec.model])
            assert prs[i] == pytest.approx(want, rel=1e-9), job.id
            assert keys[i] == pytest.approx(want.max(), rel=1e-9)
            self.checked += 1
            self.reported += len(job.metrics.get("loss", ())) >= 2
            if i < 3:  # one job alone: computed on its own tasks (the subset path)
                assert self.priorities(view, job) == pytest.approx(want, rel=1e-9)
                self.single += len(self._table._shapes) > 8  # 1 job of > 8 known: the subset path
        return super().round(view)


@pytest.mark.parametrize("params", [{}, {"alpha": 0.9, "gamma": 0.5, "use_deadline": False, "use_urgency": False}])
def test_table_equals_eq2_to_6_task_by_task_over_a_run(params: dict) -> None:
    pol = Checked(**params)
    simulate(generate(24, seed=4, compress=100), preset("mlfs"), pol)
    assert pol.checked > 500 and pol.reported > 50  # many rounds, with jobs mid-run and measured losses
    assert pol.single > 100  # single-job calls on their own tasks, checked too


def test_table_forgets_ended_jobs_and_compacts() -> None:
    jobs = [JobView(tj.spec, i) for i, tj in enumerate(generate(60, seed=1))]
    tab = PriorityTable(PriorityParams())
    keys, prs = tab.compute(jobs, 0.0, {})
    before = {j.id: prs[i].copy() for i, j in enumerate(jobs)}
    for j in jobs[:45]:
        tab.remove(j.id)
    assert len(tab) == 15 and len(tab._shapes) < 30  # the dead slots were compacted away
    keys2, prs2 = tab.compute(jobs[45:], 0.0, {})
    for i, j in enumerate(jobs[45:]):
        assert prs2[i] == pytest.approx(before[j.id])
        assert keys2[i] == pytest.approx(before[j.id].max())
    assert math.isfinite(float(keys2.sum()))


def reference_features(view: ClusterView, job: JobView, free: float, fallback: float) -> np.ndarray:
    """MLF-RL's state of one job, feature by feature (the definitions in ``rl.py``)."""
    now, spec, g = view.now, job.spec, job.spec.graph
    total = spec.iterations or 0
    done = job.iterations_done(now)
    rem = (max(spec.iterations - done, 0.0) * (job.iter_time or fallback)) if spec.iterations is not None else math.inf
    dl = spec.absolute_deadline
    slack = (dl - now - (rem if math.isfinite(rem) else 0.0)) / 3600.0 if dl is not None else 48.0
    return np.array([spec.urgency / 10.0, 1.0 / (done + 1.0), loss_reduction_share(job),
                     math.log2(max(spec.num_gpus, 1.0)) / 5.0, np.tanh(slack / 12.0),
                     math.log1p(rem / 3600.0) / 5.0 if math.isfinite(rem) else 1.0,
                     math.log1p(job.waiting_time(now) / 3600.0) / 3.0, float(job.id in view.paused),
                     done / total if total else 0.0, (g.num_partitions / 8.0) if g is not None else 0.125,
                     ((g.activation_mb + g.exchange_mb) / 200.0) if g is not None else 0.0,
                     float(spec.architecture == "ps"), free, 1.0])


def test_queue_features_equal_the_per_job_definitions_over_a_run() -> None:
    from cohabit.policies.mlfs.rl import MLFRL, queue_features

    class CheckedRL(MLFRL):
        checked = 0

        def queue(self, view, jobs):  # type: ignore[no-untyped-def, override]
            jobs = list(jobs)
            live = [*view.running.values(), *jobs]
            fb = self._fallbacks(view, live)
            x = queue_features(self._table, view, live, fb, 0.5, self._static)
            for i, job in enumerate(live):
                assert x[i] == pytest.approx(reference_features(view, job, 0.5, fb[job.spec.model]), rel=1e-9), job.id
                self.checked += 1
            return super().queue(view, jobs)

    pol = CheckedRL()
    simulate(generate(24, seed=4, compress=100), preset("mlfs"), pol)
    assert pol.checked > 300


def test_queue_pruning_changes_no_placement() -> None:
    """The no-host memo and the max_tasks bound only skip searches that would fail: every round
    places exactly what a search of every queued job places."""
    import copy

    import numpy as np

    from cohabit.policies.base import launch

    class Compared(MLFH):
        rounds = 0
        skipped_any = 0

        def _place_queue(self, view, scratch, queue):  # type: ignore[no-untyped-def, override]
            ref = copy.copy(scratch)
            ref.free, ref.dev, ref.net_util = scratch.free.copy(), scratch.dev.copy(), scratch.net_util.copy()
            want, free = [], float(ref.free[:, ref.gpu].sum()) if ref.gpu is not None else math.inf
            tried = 0
            for _, job, pr in queue:  # every job searched, no pruning
                if job.spec.num_gpus > free + 1e-9:
                    continue
                tried += 1
                where = ref.place_tasks(job, [int(t) for t in np.argsort(-pr, kind="stable")])
                if where is not None:
                    want.append(launch(view, job, tuple(where[t] for t in range(len(pr)))))
                    free -= job.spec.num_gpus
                    if not self._room(ref):
                        break
            got = super()._place_queue(view, scratch, queue)
            assert got == want
            self.rounds += 1
            return got

    pol = Compared()
    simulate(generate(60, seed=2, compress=200), preset("mlfs"), pol)
    assert pol.rounds > 50

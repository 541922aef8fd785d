"""Harmony (Lee et al.): co-located parameter-server jobs with pipelined subtasks.

* :mod:`.algorithm` — Algorithm 1 (grouping, machine allocation) and the exhaustive oracle;
* :mod:`.regroup` — dynamic regrouping on completion (similar job, bunch, incremental);
* :mod:`.plan` — from target groups to ``Pause`` / ``Colocate(mode="pipelined")`` actions;
* :mod:`.policy` — the ``harmony`` policy;
* :mod:`.baselines` — ``harmony-isolated`` and ``harmony-naive`` for PS jobs.

The performance model (Eq. 1-4) is :mod:`cohabit.models.harmony_perf`; the simulated
physics is ``cohabit.sim.harmony_physics`` (never imported here).
"""

"""Scheduling policies. Adding one = one module + one line in :data:`REGISTRY` and one in :data:`DESCRIPTIONS`.

Each registry line maps a policy name to ``"module:factory"``; the factory
takes ``oracle: bool`` (policies that can read true job lengths use it, the
others ignore it) and returns a policy; a factory that also takes ``**params``
lets users set its constructor's arguments (``srtf:preempt_margin=1``, see
:mod:`.params`). Modules are imported on first use.
"""

from __future__ import annotations

import inspect
from importlib import import_module

from ..suggest import did_you_mean
from .base import BasePolicy, Policy
from .fifo import FIFO
from .params import PolicyParamError, parse_policy_spec
from .srtf import SRTF

REGISTRY: dict[str, str] = {
    "fifo": "cohabit.policies.fifo:make",
    "fifo-backfill": "cohabit.policies.fifo:make_backfill",
    "srtf": "cohabit.policies.srtf:make",
    "optimus": "cohabit.policies.optimus:make",
    "optimus-oracle": "cohabit.policies.optimus_oracle:make",
    "slaq": "cohabit.policies.slaq:make",
    "themis": "cohabit.policies.themis:make",
    "tiresias": "cohabit.policies.tiresias:make",
    "tiresias-gittins": "cohabit.policies.tiresias:make_gittins",
    "tiresias-pollux": "cohabit.policies.tiresias_pollux:make",
    "gandiva": "cohabit.policies.gandiva:make",
    "gavel-las": "cohabit.policies.gavel.las:make",
    "gavel-fifo": "cohabit.policies.gavel.fifo:make",
    "gavel-ftf": "cohabit.policies.gavel.ftf:make",
    "gavel-gandiva": "cohabit.policies.gavel.gandiva:make",
    "drf": "cohabit.policies.drf:make",
    "tetris": "cohabit.policies.tetris:make",
    "lb": "cohabit.policies.spread:make_lb",
    "binpack": "cohabit.policies.spread:make_binpack",
    "static": "cohabit.policies.static:make",
    "dorm": "cohabit.policies.dorm.policy:make",
    "dorm-1": "cohabit.policies.dorm.policy:make_1",
    "dorm-2": "cohabit.policies.dorm.policy:make_2",
    "dorm-3": "cohabit.policies.dorm.policy:make_3",
    "naive": "cohabit.policies.naive:make",
    "harmony": "cohabit.policies.harmony.policy:make",
    "harmony-isolated": "cohabit.policies.harmony.baselines:make_isolated",
    "harmony-naive": "cohabit.policies.harmony.baselines:make_naive",
    "pack": "cohabit.policies.pack:make",
    "rotary": "cohabit.policies.rotary:make",
    "srf": "cohabit.policies.srf:make",
    "bcf": "cohabit.policies.bcf:make",
    "laf": "cohabit.policies.laf:make",
    "rr": "cohabit.policies.rr:make",
    "rotary-aqp": "cohabit.policies.rotary_aqp:make",
    "edf": "cohabit.policies.edf:make",
    "lcaf": "cohabit.policies.lcaf:make",
    "relaqs": "cohabit.policies.relaqs:make",
    "pollux": "cohabit.policies.pollux:make",
    "mlfs-h": "cohabit.policies.mlfs.heuristic:make",
    "mlfs-rl": "cohabit.policies.mlfs.rl:make",
    "mlfs": "cohabit.policies.mlfs.policy:make",
    "graphene": "cohabit.policies.graphene:make",
    "hypersched": "cohabit.policies.hypersched:make",
    "tf-fair": "cohabit.policies.tf_fair:make",
    "rl-placement": "cohabit.policies.rl_placement:make",
    "drl": "cohabit.policies.drl.policy:make",
    "lif-line": "cohabit.policies.lif_line:make",
    "lif-quad": "cohabit.policies.lif_quad:make",
}

#: One sentence per registry entry, for ``cohabit policies``; each variant has its own.
DESCRIPTIONS: dict[str, str] = {
    "fifo": "First come, first served; the queue's head blocks the jobs behind it.",
    "fifo-backfill": "First come, first served; later jobs that fit start past a blocked head.",
    "srtf": "Shortest remaining time first, preemptive; remaining time from measured speed.",
    "optimus": "Optimus: workers go where fitted loss and speed models gain most (EuroSys'18).",
    "optimus-oracle": "Optimus+Oracle as the Pollux artifact runs it: true work and step times (oracle).",
    "slaq": "SLAQ: resources go to the largest predicted loss drop per unit (SoCC'17).",
    "themis": "Themis: expiring leases go to the jobs with the worst finish-time fairness (NSDI'20).",
    "tiresias": "Tiresias 2D-LAS: least attained GPU-seconds first, in discrete queues (NSDI'19).",
    "tiresias-gittins": "Tiresias with Gittins-index priorities from finished jobs' lengths (NSDI'19).",
    "tiresias-pollux": "The Pollux artifact's Tiresias: 2 queues by GPU count, queue order re-decided every 60 s.",
    "gandiva": "Gandiva: affinity placement, time-slicing, packing and migration (OSDI'18).",
    "gavel-las": "Gavel's LAS: max-min fair time shares in 360 s rounds, by share received (OSDI'20).",
    "gavel-fifo": "Gavel's FIFO: whole GPU types to the oldest jobs, in 360 s rounds (OSDI'20).",
    "gavel-ftf": "Gavel's finish-time fairness: shares minimizing the worst rho, in 360 s rounds (OSDI'20).",
    "gavel-gandiva": "Gavel's Gandiva: random same-size job pairs share GPUs at measured pair speeds.",
    "drf": "Weighted Dominant Resource Fairness between tenants (NSDI'11).",
    "tetris": "Tetris: multi-resource packing by demand and free-space alignment (SIGCOMM'14).",
    "lb": "Arrival order; each task goes to the least loaded node that fits it.",
    "binpack": "Arrival order; each task goes to the most loaded node that fits it.",
    "static": "Fixed slices of nodes per tenant (or per job), each with its own FIFO queue.",
    "dorm": "Dorm: re-partitions by MILP on every arrival and completion (θ1 = θ2 = 0.1).",
    "dorm-1": "Dorm with the paper's Dorm-1 bounds: fairness loss θ1 = 0.2, adjustment θ2 = 0.1.",
    "dorm-2": "Dorm with the paper's Dorm-2 bounds: fairness loss θ1 = 0.1, adjustment θ2 = 0.2.",
    "dorm-3": "Dorm with the paper's Dorm-3 bounds: fairness loss θ1 = 0.1, adjustment θ2 = 0.1.",
    "naive": "Arrival order; when no GPU is free, shares busy GPUs without looking at interference.",
    "harmony": "Harmony: groups parameter-server jobs on shared machines and pipelines their subtasks.",
    "harmony-isolated": "Harmony's baseline: every parameter-server job on machines of its own.",
    "harmony-naive": "Harmony's baseline: parameter-server jobs share machines without coordination.",
    "pack": "Arrival order; similar pending jobs train jointly as one packed model on one device.",
    "rotary": "Rotary-DLT: lowest estimated progress first until all reach T, then highest (Liu, Alg. 5).",
    "srf": "Rotary's baseline: shortest runtime criteria first, the rest round-robin by epoch.",
    "bcf": "Rotary's baseline: biggest convergence criteria first, the rest round-robin by epoch.",
    "laf": "Rotary's baseline: lowest accuracy criteria first, the rest round-robin by epoch.",
    "rr": "Round-robin: every active job gets a device in turn, one epoch at a time.",
    "rotary-aqp": "Rotary-AQP: epochs to the queries expected to close most of their accuracy gap (Alg. 4).",
    "edf": "Earliest deadline first: each epoch goes to the jobs whose WITHIN deadline comes first.",
    "lcaf": "Least current accuracy first (Rotary-AQP's LAF): epochs to the lowest reported accuracy.",
    "relaqs": "ReLAQS: each epoch to the jobs that gained most accuracy per second in their last one.",
    "pollux": "Pollux: GPUs every 60 s to the best goodput speed-ups; jobs adapt batch sizes (OSDI'21).",
    "mlfs-h": "MLF-H: ML-feature task priorities over job DAGs, ideal-virtual-host placement (CoNEXT'20).",
    "mlfs-rl": "MLF-RL: a policy network (imitates MLF-H, then Eq. 7 rewards) ranks the queue (CoNEXT'20).",
    "mlfs": "MLFS: MLF-RL once trained (else MLF-H), MLF-C early stopping under overload (CoNEXT'20).",
    "graphene": "Graphene: troublesome DAG jobs (many dependants, hard to pack) first (OSDI'16).",
    "hypersched": "HyperSched: earliest deadline first; pauses the job gaining least accuracy (SoCC'19).",
    "tf-fair": "TensorFlow on Borg: tenants holding the fewest GPUs go first, whole jobs, no preemption.",
    "rl-placement": "Mirhoseini-style RL placement: REINFORCE per model on how far to spread (ICML'17).",
    "drl": "Harmony-DRL: a transformer policy places a new job's workers and PS one by one (ToN'22).",
    "lif-line": "Least interference first: tasks where a linear CPU/network slowdown model predicts least.",
    "lif-quad": "Least interference first by a quadratic CPU/network slowdown model (Bao et al.).",
}


def make_policy(spec: str, *, oracle: bool = False) -> Policy:
    """Build the policy ``spec`` names: a registry name, optionally with parameters
    (``srtf:preempt_margin=1``, see :mod:`.params`). Unknown names list the known ones."""
    name, params = parse_policy_spec(spec)
    try:
        target = REGISTRY[name]
    except KeyError:
        raise PolicyParamError(_unknown(name)) from None
    module, _, attr = target.partition(":")
    factory = getattr(import_module(module), attr)
    if not params:
        return factory(oracle)
    takes = any(p.kind is p.VAR_KEYWORD for p in inspect.signature(factory).parameters.values())
    if not takes:
        raise PolicyParamError(f"policy {name!r} takes no parameters, got {', '.join(sorted(params))}")
    policy = factory(oracle, **params)
    # one name: the registry name the user typed (with the [oracle] tag), then the parameters as given
    tag = "[oracle]" if policy.name.endswith("[oracle]") else ""
    policy.name = f"{name}{tag}:" + ":".join(f"{k}={v}" for k, v in params.items())
    return policy


def _unknown(name: str) -> str:
    """The error for an unknown policy name: the nearest known name, and what an ``[oracle]`` tag means."""
    msg = f"unknown policy {name!r}"
    base = name.removesuffix("[oracle]")
    if base != name and base in REGISTRY:
        msg += f" (the [oracle] tag in results names a run with --oracle: use --policy {base} --oracle)"
    else:
        msg += did_you_mean(base, REGISTRY)
    return f"{msg}; known policies: {', '.join(sorted(REGISTRY))}"


def policy_list(text: str) -> list[str]:
    """Split a comma-separated ``--policy`` value and check that every entry builds.

    Raises :class:`PolicyParamError` (a ``ValueError``) naming the first unknown policy or bad parameter.
    """
    names = [p.strip() for p in text.split(",") if p.strip()]
    if not names:
        raise PolicyParamError(f"no policy given; known policies: {', '.join(sorted(REGISTRY))}")
    for n in names:
        make_policy(n)
    return names


def settable_params(name: str) -> dict[str, object]:
    """Parameters users may set on registry entry ``name``, with their defaults (empty if none)."""
    module, _, attr = REGISTRY[name].partition(":")
    return dict(getattr(getattr(import_module(module), attr)(False), "parameters", {}))


__all__ = ["DESCRIPTIONS", "REGISTRY", "BasePolicy", "FIFO", "Policy", "SRTF", "PolicyParamError", "make_policy", "policy_list", "settable_params"]

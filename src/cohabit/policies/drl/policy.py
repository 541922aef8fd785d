"""``drl``: Harmony-DRL's placement policy (Bao et al., ToN'22, §V) with the shipped weights.

At each decision, the pending jobs (those that arrived since the last one) are placed task by
task (:mod:`.taskwise`): one inference of the policy network (:class:`.nets.PolicyNet`) per
worker or parameter server, over the state of every concurrent job (:mod:`.state`), invalid
actions masked; the most probable action is taken (``sample=True`` draws from the
distribution instead; on 6 servers the log-probabilities are first tilted by LIF-Line's
interference score, :mod:`.prior`, at weight 1000 with each job's predicted slowdown weighted by its estimated
time left (``weigh=left``; ``prior=3:weigh=none`` is the default before session drl19a), ``prior=0`` is the actor alone; ``ensemble=A+B`` averages the
logits of more actors; on 6 and 30 servers a job that would run on more servers than it needs waits for
room instead, :mod:`.hold`, ``hold=0`` places it spread as before,
``starve=k`` lets it spread after k times its estimated solo time; on 30 servers ``layout=fit``, the
default there, lays each job's tasks out again on its servers for its estimated speed, :mod:`.layout`) and the state updated before the next inference. Running jobs never
move. The weights (``data/drl/policy.pt``, made by ``cohabit train drl``; the JSON beside them
names the command, seed and workload) fix the number of servers ``M``; ``data/drl/policy-30.pt``
are those for the 30-server ``drl-30`` preset. A cluster of another size is refused with that
reason.
"""

from __future__ import annotations

import json
from importlib import resources as ilr
from pathlib import Path
from typing import Any

import numpy as np

from ...engine.actions import Plan
from ...engine.view import ClusterView
from ...spec.cluster import ClusterSpec
from ..params import build
from .isolate import check_isolate
from .hold import hold_seconds, starve_factor
from .order import PendingOrder
from .layout import check_layout, layout_for
from .prior import check_weigh, lif_scores, prior_weight, remaining_intervals, tilted_choice, weigh_for
from .state import JobEntry, PlacementState
from .taskwise import TaskwisePolicy


def shipped(name: str) -> Path:
    """Path of a file shipped in ``cohabit/data/drl``."""
    return Path(str(ilr.files("cohabit.data").joinpath("drl", name)))


def load_policy_net(path: Path) -> tuple[Any, dict[str, Any]]:
    """The policy network stored at ``path`` (a state dict) and its JSON metadata beside it."""
    import torch

    from .nets import PolicyNet

    meta_path = path.with_suffix(".json")
    if not path.is_file() or not meta_path.is_file():
        raise ValueError(f"drl weights not found: {path} and {meta_path} are needed (make them with "
                         f"'cohabit train drl')")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    net = PolicyNet(int(meta["servers"]), heads=int(meta.get("heads", 8)))
    net.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    net.eval()
    return net, meta


#: shipped weights per number of servers (the ``drl`` and ``drl-30`` presets)
SHIPPED: dict[int, str] = {6: "policy.pt", 30: "policy-30.pt"}


class DRLPolicy(TaskwisePolicy):
    """Harmony-DRL: one policy-network inference per task of each new job."""

    def __init__(self, weights: str = "", sample: bool = False, seed: int = 0, online: bool = False,
                 reward: str = "", order: str = "short", isolate: str = "auto", ensemble: str = "",
                 prior: float = -1.0, hold: float = -1.0,
                 starve: float = -1.0, layout: str = "auto", weigh: str = "auto") -> None:
        import torch

        # one inference is a few small matrix products: intra-op threads only add synchronisation
        # (measured here: 1.2 ms of CPU per inference on one thread, 66 ms on two under load)
        torch.set_num_threads(1)
        self.weights = weights
        self._nets: dict[int, tuple[Any, dict[str, Any]]] = {}
        if weights:
            net, meta = load_policy_net(Path(weights))
            self._nets[net.m] = (net, meta)
        else:  # the 6-server weights at once (a missing file shows now); others when a cluster needs them
            self._net_for(6)
        self.net, self.meta = next(iter(self._nets.values()))
        # more actors whose logits are averaged with the main one's ('+'-separated weight files)
        self.ensemble = ensemble
        self._extra: dict[int, list[Any]] = {}
        for path in (p for p in ensemble.split("+") if p):
            extra, _ = load_policy_net(Path(path))
            self._extra.setdefault(extra.m, []).append(extra)
        self.extra: list[Any] = self._extra.get(self.net.m, [])
        self.sample = sample
        self.rng = np.random.default_rng(seed)
        self.name = "drl"
        self.pending_order = PendingOrder(order)
        self.isolate = check_isolate(isolate, allow_auto=True)
        # .hold: wait up to this many seconds rather than run spread; < 0 = auto, per cluster size
        self.hold = float(hold)
        # .hold.due: a held job may run spread after ``starve`` x its estimated solo time; < 0 = auto
        self.starve_k = float(starve)
        # .layout: the job's task counts per server chosen again for its estimated speed (auto: per size)
        self.layout = check_layout(layout, allow_auto=True)
        self.inferences = 0
        # the prior's score weighted by each job's estimated run time left (.prior.lif_scores with weights)
        self.weigh = check_weigh(weigh, allow_auto=True)
        self.weigh_now = "none"
        self._weights: dict[str, float] = {}
        self._solo_profile: dict[str, dict[str, float]] | None = None
        # interference prior (.prior): < 0 = auto, the weight chosen per cluster size
        self.prior = prior
        self.prior_w = 0.0
        self._lif: Any = None
        self.online = online
        self.reward_path = Path(reward) if reward else shipped("reward.pt")
        self.online_reward: Any = None  # policies.drl.online.OnlineReward once the first decision needs it

    def _net_for(self, m: int) -> tuple[Any, dict[str, Any]] | None:
        """The weights for ``m`` servers: the given ones, or the shipped ones for that size."""
        if m not in self._nets and not self.weights and m in SHIPPED:
            self._nets[m] = load_policy_net(shipped(SHIPPED[m]))
        return self._nets.get(m)

    def _sizes(self) -> str:
        sizes = sorted(self._nets) if self.weights else sorted(SHIPPED)
        return " or ".join(str(m) for m in sizes)

    def cluster_problem(self, cluster: ClusterSpec) -> str | None:
        """The weights fit one cluster size each (Section IV: 2M actions)."""
        n = len(cluster.nodes)
        if self._net_for(n) is None:
            return (f"drl: the weights were trained for {self._sizes()} servers, cluster {cluster.name!r} has "
                    f"{n}; use the 'drl' or 'drl-30' preset or train weights for it with "
                    f"'cohabit train drl --servers {n}'")
        return None

    def decide(self, view: ClusterView) -> Plan:
        """``online=true``: first retrain the reward model on the speeds the running jobs reported
        (once per interval, :mod:`.online`), then place the new jobs."""
        if self.online:
            if self.online_reward is None:
                self.online_reward = self._online_reward(view.capacity.shape[0])
            self.online_reward.step(view)
        return super().decide(view)

    def _online_reward(self, m: int) -> Any:
        import torch

        from .nets import RewardNet
        from .online import OnlineReward, load_solo

        meta = self.reward_path.with_suffix(".json")
        servers = int(json.loads(meta.read_text(encoding="utf-8")).get("servers", 6)) if meta.is_file() else 6
        if not self.reward_path.is_file() or servers != m:
            raise ValueError(f"drl:online=true needs a reward model for {m} servers: {self.reward_path} "
                             f"{'is missing' if not self.reward_path.is_file() else f'is for {servers}'} "
                             f"(make one with 'cohabit train drl-reward')")
        net = RewardNet(m)
        net.load_state_dict(torch.load(self.reward_path, map_location="cpu", weights_only=True))
        net.eval()
        return OnlineReward(net, load_solo())

    def isolate_for(self, m: int) -> str:
        """``isolate=auto``: ``compact`` on 30 servers or more, where the actor does not learn to keep
        new jobs off busy servers and LIF-Quad never shares one; ``never`` (the paper's masks) below."""
        if self.isolate != "auto":
            return self.isolate
        return "compact" if m >= 30 else "never"

    def layout_for(self, m: int) -> str:
        """``layout=auto``: :data:`.layout.AUTO`'s rule for ``m`` servers."""
        return layout_for(self.layout, m)

    def begin(self, state: PlacementState, view: ClusterView) -> None:
        got = self._net_for(state.m)
        if got is None:
            raise ValueError(f"drl: the weights were trained for {self._sizes()} servers, the cluster has "
                             f"{state.m}; train weights for it with 'cohabit train drl --servers {state.m}'")
        self.net, self.meta = got
        self.extra = self._extra.get(state.m, [])
        self.prior_w = prior_weight(self.prior, state.m)
        self.hold_s = hold_seconds(self.hold, state.m)
        self.starve = starve_factor(self.starve_k, state.m)
        if self.prior_w > 0:
            if self._lif is None:
                from ..lif_line import LIFPolicy

                self._lif = LIFPolicy("line")
            self._lif.begin(state, view)
            self.weigh_now = weigh_for(self.weigh, state.m)
            if self.weigh_now == "left":
                if self._solo_profile is None:
                    from .online import load_solo

                    self._solo_profile = load_solo()
                self._weights = remaining_intervals(view, self._solo_profile)

    def probabilities(self, state: PlacementState, job: JobEntry, mask: np.ndarray) -> np.ndarray:
        """The policy's distribution over the ``2M`` actions for ``job``'s next task (0 where masked)."""
        import torch

        from .nets import masked_log_probs

        with torch.no_grad():
            jobs = torch.from_numpy(state.tokens()).unsqueeze(0)
            dec = torch.from_numpy(state.decision_tokens()).unsqueeze(0)
            args = (jobs, torch.zeros(jobs.shape[:2], dtype=torch.bool), torch.tensor([state.jobs.index(job)]), dec,
                    torch.zeros(dec.shape[:2], dtype=torch.bool))
            logits = self.net(*args)
            if self.extra:  # an ensemble: the mean of every actor's logits
                logits = torch.stack([logits] + [net(*args) for net in self.extra]).mean(0)
            logp = masked_log_probs(logits, torch.from_numpy(mask).unsqueeze(0))[0]
        self.inferences += 1
        return logp.exp().numpy()

    def choose(self, state: PlacementState, job: JobEntry, mask: np.ndarray) -> int:
        p = self.probabilities(state, job, mask)
        if self.sample:
            p = np.where(mask, p, 0.0)
            return int(self.rng.choice(p.size, p=p / p.sum()))
        if self.prior_w > 0:
            weights = self._weights if self.weigh_now == "left" else None
            return tilted_choice(p, lif_scores(self._lif, state, job, mask, weights), mask, self.prior_w)
        return int(np.argmax(np.where(mask, p, -1.0)))


def make(oracle: bool = False, **params: object) -> DRLPolicy:
    return build(DRLPolicy, params, policy="drl")

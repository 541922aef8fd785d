"""Gandiva's packing steps within a decision round (Xiao et al., OSDI'18, §4.1 "Packing"; see :mod:`.gandiva`):
a waiting job is colocated on the GPUs of a running job of its size when the scheduler's ledger would time-share
exactly that host's devices (:class:`HostPacking`, mixed into :class:`~.gandiva_round.GandivaRound`). Which hosts
the ledger would time-share is kept per host across rounds (``Gandiva._host_ok``)."""

from __future__ import annotations

from itertools import islice
from typing import TYPE_CHECKING

from ..engine.actions import Colocate, Plan
from ..engine.view import ClusterView
from .gandiva_records import EPS, JobRec, PackTrial
from .placement import Draft

if TYPE_CHECKING:
    from .gandiva import Gandiva

LEDGER_MAX_SHARE = 4  # the scheduler's ledger refuses more jobs than this on one GPU
MAX_PACK_SCAN = 32  # hosts examined per packing attempt


class HostPacking:
    """The packing steps of a round (:class:`~.gandiva_round.GandivaRound` sets these attributes)."""

    p: Gandiva
    view: ClusterView
    draft: Draft
    plan: Plan
    log: list[tuple[str, str]]
    now: float
    g: int | None
    failed_pack: set[tuple[int, float, str]]
    dirty: set[int]
    moved: set[str]
    _hosts_seen: bool

    def _see_hosts(self) -> None:
        """Before the round's first packing attempt that has hosts to check (a round with none skips it): the
        kept host answers brought up to this ledger, and the device orders they read."""
        self._hosts_seen = True
        policy, view = self.p, self.view
        # per host: would the ledger time-share its devices (_ledger_picks)? The answer reads only the host's
        # nodes and devices, those nodes' rows of the ledger's device table and the policy's shared devices
        # there, so it is kept per host (``Gandiva._host_ok``) and forgotten when one of these changes: here,
        # for the hosts on the nodes whose rows differ from the table as last seen; when the policy's shared
        # devices change on a node, for the hosts there; when a job's held nodes change, for the job. The
        # ledger does not change within a round, and a pack makes its host's nodes dirty before it changes
        # the shared devices there (hosts on dirty nodes are not asked again in the round).
        seen = policy._dev_seen
        dev = view.device_free
        if seen is None or seen[0] is not view or seen[2].shape != dev.shape:
            policy._host_ok.clear()
            policy._dev_seen = (view, view.allocation_version, dev.copy())
        elif seen[1] != view.allocation_version:
            table = seen[2]
            changed = (dev != table).any(axis=1).nonzero()[0]  # (np.flatnonzero without its wrapper)
            if changed.size:
                policy._forget_host_answers(changed.tolist())
                table[changed] = dev[changed]
            policy._dev_seen = (view, view.allocation_version, table)
        # the free-device row and each node's devices in the ledger's order for a guest (what _ledger_picks
        # reads), kept while neither the ledger nor the shared devices changed (``Gandiva._picks_memo``)
        key = (view.allocation_version, policy._shared_version)
        memo = policy._picks_memo
        if memo is None or memo[0] is not view or memo[1] != key:
            memo = policy._picks_memo = (view, key, [None], {})
        self._free_dev_box: list[list[bool] | None] = memo[2]  # per node: has a whole free GPU device (the ledger's)
        self._node_order: dict[int, list[int]] = memo[3]  # per node: its devices in the ledger's order for a guest

    # ---------------------------------------------------------------- packing
    def pack(self, rec: JobRec) -> bool:
        """Colocate ``rec`` on the GPUs of a running job of its size (paper §4.1 "Packing")."""
        view, draft, g, p = self.view, self.draft, self.g, self.p
        key = rec.pack_key
        hosts = p._idle.get((rec.n, rec.cls))
        if g is None or not hosts or key in self.failed_pack:
            return False
        bad = p._bad_with.get(rec.model, ())  # (the models in a bad pair with rec's: p._bad_pairs)
        moved, partner, dirty, host_ok = self.moved, p._partner, self.dirty, p._host_ok
        if not self._hosts_seen:
            self._see_hosts()  # (the kept answers brought up to this ledger before any is read)
        # the first MAX_PACK_SCAN hosts, without copying them all (the loop returns right after it changes them)
        for host in islice(hosts.values(), MAX_PACK_SCAN):
            hid = host.id
            ok = host_ok.get(hid)
            if ok is False:  # (the usual answer: the ledger would not time-share exactly its devices)
                continue
            if hid in moved or hid in partner or host.job.iter_time is None \
                    or host.model in bad or (dirty and not dirty.isdisjoint(host.nodes)):
                continue
            if ok is None:
                alloc = view.allocation_of(hid)
                ok = host_ok[hid] = alloc is not None and self._ledger_picks(host.nodes, alloc.devices)
            if not ok:
                continue
            alloc = view.allocation_of(hid)
            assert alloc is not None
            rest = view.demand_vector(rec.job).copy()  # (what the guest takes beside the host's GPUs)
            rest[g] = 0.0
            per_node: dict[int, int] = {}
            for node in host.nodes:
                per_node[node] = per_node.get(node, 0) + 1
            if any((draft.free[node] - rest * c < -EPS).any() for node, c in per_node.items()):
                continue
            for node, c in per_node.items():
                draft.free[node] -= rest * c
            self.plan.append(Colocate((rec.id, hid), host.nodes))
            self.log.append(("run", rec.id))
            p._trials[rec.id] = PackTrial(hid, self.now, float(host.job.iter_time))
            p._to_running(rec, host.nodes, self.now)
            p._partner[rec.id] = hid
            p._partner[hid] = rec.id
            p._not_victim(rec)
            p._not_victim(host)
            p._shared_devs[rec.id] = alloc.devices
            p._shared.update(alloc.devices)
            p._shared_version += 1
            p._forget_host_answers({node for node, _ in alloc.devices})
            p._idle[(host.n, host.cls)].pop(hid, None)
            self.moved.add(hid)  # a host is not sliced or migrated in the round it packs
            self.dirty.update(host.nodes)
            return True
        self.failed_pack.add(key)
        return False

    def _ledger_picks(self, nodes: tuple[int, ...], host_devices: frozenset[tuple[int, int]]) -> bool:
        """True if the ledger would time-share exactly the host's devices: it gives a guest the
        devices with the fewest jobs, then the most free room, then the lowest index."""
        dev = self.view.device_free
        shared = self.p._shared
        free_dev = self._free_dev_box[0]
        if free_dev is None:
            free_dev = self._free_dev_box[0] = (dev >= 1.0 - EPS).any(axis=1).tolist()  # (-1: no device, never free)
        order = self._node_order  # (kept like the answers: a pack dirties its nodes before it shares there)
        for node in set(nodes):
            if free_dev[node]:
                return False  # a free device on the node: the guest would own it instead
            o = order.get(node)
            if o is None:
                o = order[node] = [x[2] for x in sorted((1 + ((node, i) in shared), -f, i)
                                                        for i, f in enumerate(dev[node].tolist()) if f >= 0)
                                   if x[0] < LEDGER_MAX_SHARE]
            if {(node, i) for i in o[: nodes.count(node)]} != {key for key in host_devices if key[0] == node}:
                return False
        return True

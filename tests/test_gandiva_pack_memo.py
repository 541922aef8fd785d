"""Gandiva's failed packing attempts answered across rounds (``GandivaRound._hosts_still_no``, docs/speed.md
"Nineteenth session"): a packing window whose every host answered no stays no while its hosts, their kept answers
and their nodes' rows in the ledger stay."""

from __future__ import annotations

from itertools import islice

from cohabit.policies import gandiva_round as gandiva_round_mod
from cohabit.policies.gandiva import Gandiva
from cohabit.policies.gandiva_pack import MAX_PACK_SCAN, NO_HOSTS_AGE
from cohabit.policies.gandiva_round import GandivaRound
from cohabit.report.fingerprint import fingerprint
from cohabit.sim.runner import simulate


def _run(monkeypatch, *, memo: bool):  # type: ignore[no-untyped-def]
    from cohabit.sim.traces import load_trace
    from cohabit.spec import cluster_from_arg

    hits = [0]
    real = GandivaRound._hosts_still_no

    def checked(self: GandivaRound, ikey, hosts) -> bool:  # type: ignore[no-untyped-def]
        if not memo:
            return False
        yes = real(self, ikey, hosts)
        if yes:  # every host of the window answers no on this ledger, asked afresh
            hits[0] += 1
            fresh = GandivaRound.__new__(GandivaRound)
            fresh.view, fresh.p, fresh._free_dev_box, fresh._node_order = self.view, self.p, [None], {}
            for host in islice(hosts.values(), MAX_PACK_SCAN):
                alloc = self.view.allocation_of(host.id)
                assert alloc is not None and not fresh._ledger_picks(host.nodes, alloc.devices), host.id
        return yes

    monkeypatch.setattr(gandiva_round_mod.GandivaRound, "_hosts_still_no", checked)
    jobs = load_trace("philly_82k", "philly", limit=5000).jobs
    out = simulate(jobs, cluster_from_arg("philly-512"), Gandiva())
    return fingerprint(out.result.record, out.metrics), hits[0]


def test_a_packing_window_kept_as_no_is_no_afresh_and_plans_the_same(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """On a contended run that packs, many first packing attempts of a round are answered from the kept window
    (without bringing the kept answers up to the ledger); each such answer equals fresh checks of every host in the
    window (fails when the test of the window's nodes against the ledger's changes is dropped, or the test that each
    kept answer is still no), and the schedule equals the one without the memo."""
    fast, hits = _run(monkeypatch, memo=True)
    slow, _ = _run(monkeypatch, memo=False)
    assert hits > 100, hits
    assert fast == slow


class _View:
    """What ``_hosts_still_no`` reads of a view: its change mark and the nodes changed since a mark."""

    def __init__(self) -> None:
        self.change_mark: object = 0
        self.allocation_version = 10 + NO_HOSTS_AGE
        self.changed: set[int] | None = set()

    def nodes_changed_since(self, mark: object) -> set[int] | None:
        return self.changed


class _Host:
    def __init__(self, hid: str, nodes: tuple[int, ...]) -> None:
        self.id, self.nodes = hid, nodes


def _round(view: _View, policy: Gandiva) -> GandivaRound:
    rnd = GandivaRound.__new__(GandivaRound)
    rnd.view, rnd.p = view, policy  # type: ignore[assignment]
    return rnd


def test_a_kept_window_is_no_only_while_its_hosts_answers_and_nodes_stay() -> None:
    """Each condition of ``_hosts_still_no`` refuses on its own: another view, a mark too old, another window (a host added in it,
    or the order changed), a kept answer forgotten or yes, a node of the window changed in the ledger, or changes not
    known; when all hold it answers yes and keeps the window at the ledger's mark now."""
    policy = Gandiva()
    view = _View()
    hosts = {h.id: h for h in (_Host("a", (0,)), _Host("b", (1, 2)))}
    ikey = (2, 2.0)

    def keep() -> None:
        policy._no_hosts[ikey] = (view, "m0", ("a", "b"), 10)  # type: ignore[assignment]
        policy._host_ok.update(a=False, b=False)
        view.changed = {5, 6}
        view.change_mark = "m1"

    keep()
    assert _round(view, policy)._hosts_still_no(ikey, hosts)  # type: ignore[arg-type]
    assert policy._no_hosts[ikey][1] == "m1"  # (kept at the mark now)
    keep()
    assert not _round(_View(), policy)._hosts_still_no(ikey, hosts)  # type: ignore[arg-type]
    keep()
    assert not _round(view, policy)._hosts_still_no(ikey, {**hosts, "c": _Host("c", (3,))})  # type: ignore[arg-type]
    keep()
    assert not _round(view, policy)._hosts_still_no(ikey, {"b": hosts["b"], "a": hosts["a"]})  # type: ignore[arg-type]
    for answer in (None, True):
        keep()
        if answer is None:
            del policy._host_ok["b"]
        else:
            policy._host_ok["b"] = True
        assert not _round(view, policy)._hosts_still_no(ikey, hosts)  # type: ignore[arg-type]
    keep()
    view.changed = {2}
    assert not _round(view, policy)._hosts_still_no(ikey, hosts)  # type: ignore[arg-type]
    keep()
    view.allocation_version += 1  # (a mark older than NO_HOSTS_AGE versions is not read)
    assert not _round(view, policy)._hosts_still_no(ikey, hosts)  # type: ignore[arg-type]
    view.allocation_version -= 1
    keep()
    view.changed = None
    assert not _round(view, policy)._hosts_still_no(ikey, hosts)  # type: ignore[arg-type]
    assert not _round(view, policy)._hosts_still_no((1, 1.0), hosts)  # type: ignore[arg-type]  # (nothing kept)

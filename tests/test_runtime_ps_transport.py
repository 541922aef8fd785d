"""PS transport pieces: wire format, shared per-node bandwidth budget, partitions, checkpoint parts."""

from __future__ import annotations

import socket
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cohabit.runtime.ps.launch import node_bandwidth
from cohabit.runtime.ps.netlimit import NodeBucket
from cohabit.runtime.ps.parts import (
    assemble, checkpoint_iteration, clear_parts, load_model, partition, parts_store, restore_point, save_part,
)
from cohabit.runtime.ps.wire import Conn, PeerGone, decode, encode
from cohabit.spec import ClusterSpec, Resources

shapes = st.lists(st.integers(0, 5), min_size=1, max_size=3)


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.text("abcxyz", min_size=1, max_size=4), st.tuples(shapes, st.sampled_from(["<f8", "<i8", "<f4"])),
                       max_size=4), st.integers(-5, 5))
def test_ps_wire_roundtrip(spec, it) -> None:
    rng = np.random.default_rng(0)
    arrays = {k: (rng.standard_normal(s) * 100).astype(dt) for k, (s, dt) in spec.items()}
    raw = encode({"type": "push", "iteration": it}, arrays)
    a, b = socket.socketpair()
    with a, b:
        sender = threading.Thread(target=Conn(a).send, args=(raw,))
        sender.start()
        got, hl = Conn(b).recv()
        sender.join()
    header, back = decode(got, hl)
    assert header == {"type": "push", "iteration": it}
    assert list(back) == list(arrays)
    for k in arrays:
        assert back[k].dtype == arrays[k].dtype and back[k].shape == arrays[k].shape
        np.testing.assert_array_equal(back[k], arrays[k])


def test_ps_conn_reports_a_closed_peer() -> None:
    a, b = socket.socketpair()
    a.close()
    with pytest.raises(PeerGone):
        Conn(b).recv()
    b.close()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 9), min_size=1, max_size=3), st.integers(1, 6))
def test_ps_partition_then_assemble_is_the_identity(rows, servers) -> None:
    model = {f"a{i}": np.arange(r * 3, dtype=float).reshape(r, 3) for i, r in enumerate(rows)}
    blocks = partition(model, servers)
    assert len(blocks) == servers
    for k, v in model.items():
        assert sum(b[k].shape[0] for b in blocks) == v.shape[0]
        np.testing.assert_array_equal(assemble(blocks)[k], v)


def _throughput(links: list[NodeBucket], nbytes: int, chunk: int = 1 << 14) -> float:
    def pump(link: NodeBucket) -> None:
        for _ in range(nbytes // chunk):
            link.charge(chunk)

    threads = [threading.Thread(target=pump, args=(ln,)) for ln in links]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(links) * nbytes / (time.monotonic() - t0)


def test_ps_node_link_caps_the_rate_shared_by_every_user_of_the_node(tmp_path) -> None:
    rate = 4e6  # bytes/s
    one = _throughput([NodeBucket(tmp_path / "n0", rate)], 1_000_000)
    # two independent openers of the same file (as two processes would be) share the same budget
    two = _throughput([NodeBucket(tmp_path / "n1", rate), NodeBucket(tmp_path / "n1", rate)], 1_000_000)
    # the cap is the rule: an upper bound (a loaded machine only delays wake-ups, which lowers the rate;
    # that the bucket is not stricter than its rate is shown on a fake clock below)
    assert one < 1.1 * rate
    assert two < 1.1 * rate  # the sum of both, not twice the rate


def test_ps_node_link_grants_its_full_rate_to_openers_that_share_it(tmp_path, monkeypatch) -> None:
    """On a clock that moves only by the bucket's own sleeps: two openers of one node's bucket that
    take turns get exactly its rate together (each reservation starts where the last one ended)."""
    import cohabit.runtime.ps.netlimit as netlimit

    class Clock:
        now = 50.0

        def monotonic(self) -> float:
            return self.now

        def sleep(self, s: float) -> None:
            self.now += s

    clock = Clock()
    monkeypatch.setattr(netlimit, "time", clock)
    rate, chunk = 4e6, 1 << 14
    links = [NodeBucket(tmp_path / "n", rate), NodeBucket(tmp_path / "n", rate)]
    t0 = clock.now
    for _ in range(61):
        for link in links:
            link.charge(chunk)
    sent = 2 * 61 * chunk
    assert sent / (clock.now - t0) == pytest.approx(rate, rel=0.01)  # (within the 2 ms burst)
    assert sum(link.waited_s for link in links) == pytest.approx(clock.now - t0)


def test_ps_node_bandwidth_from_capacity_or_override() -> None:
    cl = ClusterSpec.homogeneous("x", 2, Resources(cpu=1, net_gbps=1.1))
    assert node_bandwidth(cl, None) == [pytest.approx(1.1e9 / 8)] * 2
    assert node_bandwidth(cl, 80) == [1e7, 1e7]
    assert node_bandwidth(cl, [8, None]) == [1e6, None]
    assert node_bandwidth(ClusterSpec.homogeneous("y", 1, Resources(cpu=1)), None) == [None]
    with pytest.raises(ValueError, match="one value per node"):
        node_bandwidth(cl, [1.0])
    with pytest.raises(ValueError, match=r"bandwidth_mbps\[1\]"):
        node_bandwidth(cl, [1.0, -2.0])


def _save_set(parts, it: int, nw: int, ns: int, skip: str = "") -> None:
    for k in range(ns):
        if f"server-{k}" != skip:
            save_part(parts, "server", k, {"model": {"x": np.full((2, 1), float(it + k))}}, iteration=it,
                      n_workers=nw, n_servers=ns)
    for r in range(nw):
        if f"worker-{r}" != skip:
            save_part(parts, "worker", r, {"local": {"r": r}}, iteration=it, n_workers=nw, n_servers=ns)


def test_ps_restore_point_is_the_newest_complete_set(tmp_path) -> None:
    parts = parts_store(tmp_path, "job", fsync=False)
    assert restore_point(parts) is None and checkpoint_iteration(tmp_path, "job") is None
    _save_set(parts, 10, 2, 2)
    _save_set(parts, 20, 2, 2, skip="worker-1")  # a crash in the middle of the checkpoint at 20
    rp = restore_point(parts)
    assert rp is not None and (rp.iteration, rp.n_workers, rp.n_servers) == (10, 2, 2)
    assert rp.workers() == [{"r": 0}, {"r": 1}]
    _save_set(parts, 30, 3, 1)  # a resize: new layout
    assert checkpoint_iteration(tmp_path, "job") == 30
    it, model, local = load_model(tmp_path, "job")
    assert it == 30 and model["x"].shape == (2, 1) and len(local) == 3
    clear_parts(tmp_path, "job")
    assert checkpoint_iteration(tmp_path, "job") is None
    # a corrupt newest part: fall back to the previous complete set (each part keeps two)
    _save_set(parts, 40, 1, 2)
    _save_set(parts, 50, 1, 2)
    path = parts.paths("server-1")[0]
    path.write_bytes(path.read_bytes()[:-3] + b"xyz")
    assert checkpoint_iteration(tmp_path, "job") == 50  # headers only: the damage is not seen yet
    assert restore_point(parts).iteration == 40
    clear_parts(tmp_path, "job")
    assert checkpoint_iteration(tmp_path, "job") is None

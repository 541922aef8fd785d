"""Ledger: whole and fractional GPUs, refusal of over-allocation, GPU time-sharing (Colocate)."""

from __future__ import annotations

import numpy as np
import pytest

from cohabit.engine.ledger import AllocationError, Ledger

from conftest import small_cluster


def vec(ledger: Ledger, **r: float) -> np.ndarray:
    from cohabit.spec import Resources

    v = ledger.vector(Resources(r))
    assert v is not None
    return v


def test_whole_gpus_take_free_devices_and_release_restores() -> None:
    led = Ledger(small_cluster(1, 4))
    a = led.allocate("a", (0, 0), [vec(led, gpu=1, cpu=1)] * 2)
    assert [d for s in a.slots for d, _ in s.devices] == [0, 1]
    assert led.free[0, led.index["gpu"]] == 2
    led.release("a")
    assert led.free[0, led.index["gpu"]] == 4 and led.dev_shares == {}
    led.check()


def test_over_allocation_is_refused_and_leaves_no_trace() -> None:
    led = Ledger(small_cluster(1, 2))
    led.allocate("a", (0,), [vec(led, gpu=2)])
    before = (led.free.copy(), led.device_free.copy())
    with pytest.raises(AllocationError, match="gpu=0 free, needs 1"):
        led.allocate("b", (0,), [vec(led, gpu=1)])
    assert np.array_equal(before[0], led.free) and np.array_equal(before[1], led.device_free)


def test_fractions_best_fit_on_one_device() -> None:
    led = Ledger(small_cluster(1, 2))
    led.allocate("a", (0,), [vec(led, gpu=0.5)])
    b = led.allocate("b", (0,), [vec(led, gpu=0.25)])
    assert b.slots[0].devices == ((0, 0.25),)  # lands next to "a", not on the empty GPU
    assert led.sharers("a") == {"b"}
    with pytest.raises(AllocationError):
        led.allocate("c", (0,), [vec(led, gpu=1), vec(led, gpu=1)])
    led.check()


def test_colocate_time_shares_gpus_and_guest_inherits_the_device() -> None:
    led = Ledger(small_cluster(1, 1), max_share=2)
    led.allocate("host", (0,), [vec(led, gpu=1, cpu=1)])
    with pytest.raises(AllocationError):
        led.allocate("guest", (0,), [vec(led, gpu=1, cpu=1)])
    g = led.allocate("guest", (0,), [vec(led, gpu=1, cpu=1)], share_gpus=True)
    assert g.slots[0].devices == ((0, 0.0),)  # a time-sharing guest owns no capacity
    assert led.sharers("host") == {"guest"}
    with pytest.raises(AllocationError, match="fewer than 2 jobs"):
        led.allocate("third", (0,), [vec(led, gpu=1)], share_gpus=True)
    led.release("host")
    # the guest keeps running on the GPU: it must not look free
    assert led.free[0, led.index["gpu"]] == 0
    assert led.dev_shares[(0, 0)] == {"guest": 1.0}
    led.check()
    led.release("guest")
    assert led.free[0, led.index["gpu"]] == 1 and led.dev_shares == {}
    led.check()


def test_colocate_on_a_free_device_owns_it() -> None:
    led = Ledger(small_cluster(1, 2))
    a = led.allocate("a", (0,), [vec(led, gpu=1)], share_gpus=True)
    assert a.slots[0].devices == ((0, 1.0),)
    assert led.free[0, led.index["gpu"]] == 1


def test_colocated_job_never_shares_a_gpu_with_itself_and_releases_all() -> None:
    # two tasks of one job on a 2-GPU node with one GPU busy: one task owns the free GPU,
    # the other time-shares the busy one; releasing restores every GPU (no leaked capacity)
    led = Ledger(small_cluster(1, 2), max_share=2)
    led.allocate("host", (0,), [vec(led, gpu=1)])
    g = led.allocate("guest", (0, 0), [vec(led, gpu=1)] * 2, share_gpus=True)
    assert sorted(d for s in g.slots for d, _ in s.devices) == [0, 1]
    led.check()
    led.release("guest")
    led.release("host")
    assert led.free[0, led.index["gpu"]] == 2 and led.dev_shares == {}
    assert (led.device_free[0, :2] == 1.0).all()


def test_failed_colocate_leaves_devices_untouched() -> None:
    led = Ledger(small_cluster(1, 2), max_share=2)
    led.allocate("a", (0,), [vec(led, gpu=1)])
    before = led.device_free.copy()
    with pytest.raises(AllocationError):  # 3 tasks cannot each get their own GPU on 2 GPUs
        led.allocate("b", (0, 0, 0), [vec(led, gpu=1)] * 3, share_gpus=True)
    assert np.array_equal(before, led.device_free)


def test_colocate_on_hosts_takes_only_the_hosts_gpus() -> None:
    # a node of 3 GPUs: "a" on GPU 0, "b" on GPU 1, GPU 2 free. A plain share takes the free GPU (fewest
    # jobs first); restricted to b's devices (Colocate(on_hosts=True)) the guest time-shares b's GPU.
    led = Ledger(small_cluster(1, 3), max_share=2)
    led.allocate("a", (0,), [vec(led, gpu=1)])
    b = led.allocate("b", (0,), [vec(led, gpu=1)])
    plain = led.allocate("plain", (0,), [vec(led, gpu=1)], share_gpus=True)
    assert plain.slots[0].devices == ((2, 1.0),)
    led.release("plain")
    g = led.allocate("guest", (0,), [vec(led, gpu=1)], share_gpus=True, only_devices=b.devices)
    assert g.slots[0].devices == ((1, 0.0),) and led.sharers("b") == {"guest"}
    with pytest.raises(AllocationError, match="among those its hosts hold"):
        led.allocate("third", (0,), [vec(led, gpu=1)], share_gpus=True, only_devices=b.devices)
    led.check()


def test_device_job_counts_follow_the_shares_and_the_view_reads_them() -> None:
    from cohabit.engine.view import ClusterView
    from cohabit.engine.waiting import Waiting

    led = Ledger(small_cluster(1, 2), max_share=3)
    led.allocate("host", (0,), [vec(led, gpu=0.5)])
    led.allocate("two", (0, 0), [vec(led, gpu=0.25)] * 2)  # two tasks of one job on one device: one job
    led.allocate("guest", (0,), [vec(led, gpu=1)], share_gpus=True)  # the emptier device: owns it
    led.allocate("guest2", (0,), [vec(led, gpu=1)], share_gpus=True)  # time-shares the guest's device
    held = {k: list(v) for k, v in led.dev_shares.items()}
    assert held == {(0, 0): ["host", "two"], (0, 1): ["guest", "guest2"]}
    assert led.dev_jobs.tolist() == [[2, 2]]
    view = ClusterView(small_cluster(1, 2), led, {}, Waiting(), {}, Waiting(), None)  # type: ignore[arg-type]
    assert view.device_holders(0, 1) == ("guest", "guest2") and view.device_holders(0, 0) == ("host", "two")
    assert view.device_jobs.tolist() == [[2, 2]] and not view.device_jobs.flags.writeable
    led.release("guest")  # guest2 inherits the device; the count drops by one
    assert led.dev_shares[(0, 1)] == {"guest2": 1.0}
    assert led.dev_jobs.tolist() == [[2, 1]] and view.device_jobs.tolist() == [[2, 1]]
    assert view.device_holders(0, 1) == ("guest2",)
    led.check()
    draft = led.draft()
    draft.release("two")
    assert draft.dev_jobs.tolist() == [[1, 1]] and led.dev_jobs.tolist() == [[2, 1]]
    led.dev_jobs[0, 1] = 2
    with pytest.raises(AssertionError, match="dev_jobs"):
        led.check()

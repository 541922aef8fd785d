"""Peak-memory estimate and the guard (Liu ch. 2, §2.3.2, §2.3.4)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from cohabit.pack import DataStream, Member, MemoryGuard, estimate_pack, footprint, measure_step_peak, pack  # noqa: E402
from cohabit.pack.memory import optimizer_copies  # noqa: E402
from cohabit.pack.models import MLP3, make_digits, preprocess_digits, small_cnn  # noqa: E402

X, Y = make_digits(64, seed=3)


pytestmark = pytest.mark.usefixtures("torch_one_thread")


def _m(name: str, bs: int = 16, opt: str = "adam", arch: str = "mlp", stream: DataStream | None = None) -> Member:
    model = MLP3(64, 32, 10) if arch == "mlp" else small_cnn(1, 8, 10, 8)
    o = {"adam": torch.optim.Adam, "sgd": torch.optim.SGD, "adagrad": torch.optim.Adagrad}[opt](model.parameters(), lr=0.01)
    return Member(name, model, o, bs, stream=stream or DataStream(X, Y, preprocess=preprocess_digits))


def test_footprint_counts_optimizer_state_and_scales_with_batch() -> None:
    a, s = _m("a"), _m("s", opt="sgd")
    assert optimizer_copies(a) == 2 and optimizer_copies(s) == 0
    fa, fs = footprint(a), footprint(s)
    params = sum(p.numel() * 4 for p in a.model.parameters())
    assert fa.params == params and fa.optimizer == 2 * params and fs.optimizer == 0
    assert fa.act_per_sample > 0 and fa.at(64) > fa.at(8)


def test_pack_estimate_adds_members_and_shares_the_input() -> None:
    stream = DataStream(X, Y, preprocess=preprocess_digits)
    one = estimate_pack([_m("a", stream=stream)]).total
    two = estimate_pack([_m("a", stream=stream), _m("b", stream=stream)]).total
    f = footprint(_m("x"))
    assert two == pytest.approx(2 * one - 16 * f.input_per_sample)  # one shared input batch
    # Padding: a stacked member with a small batch is charged the group's largest batch.
    mixed = estimate_pack([_m("a", 8, stream=stream), _m("b", 32, stream=stream)])
    assert mixed.per_member["a"] == mixed.per_member["b"]
    apart = estimate_pack([_m("a", 8, stream=stream), _m("b", 32, stream=stream)], fast=False)
    assert apart.per_member["a"] < apart.per_member["b"]


def test_measured_peak_is_close_to_the_estimate() -> None:
    stream = DataStream(X, Y, preprocess=preprocess_digits)
    members = [_m("a", stream=stream), _m("b", stream=stream), _m("c", 24, "sgd", "cnn", stream)]
    est = estimate_pack(members).total
    pm = pack(members)
    pm.step()  # optimizer state exists after the first step
    measured = measure_step_peak(pm)
    assert 0.5 * est <= measured <= 1.5 * est, (measured, est)


def test_guard_refuses_an_oversized_pack_with_a_clear_error() -> None:
    stream = DataStream(X, Y, preprocess=preprocess_digits)
    members = [_m(f"m{i}", stream=stream) for i in range(4)]
    need = estimate_pack(members).total
    guard = MemoryGuard(need - 1)
    assert not guard.fits(members) and MemoryGuard(need).fits(members)
    with pytest.raises(ValueError, match=r"pack of 4 members needs an estimated .* \(\d+ bytes; m0=.*m3=.*\) but device 'cpu' has .*\(\d+ bytes\)"):
        guard.check(members)
    with pytest.raises(ValueError, match="needs an estimated"):
        pack(members, memory_limit=need - 1)
    pm = pack(members[:3], memory_limit=need - 1)
    with pytest.raises(ValueError, match="pack of 4 members"):
        pm.add(members[3])
    assert len(pm) == 3
    with pytest.raises(ValueError, match="memory capacity must be positive, got 0"):
        MemoryGuard(0)


def test_cpu_capacity_is_known() -> None:
    assert MemoryGuard().capacity > 0

"""Shared stream, pad/slice of misaligned batch sizes (Liu ch. 2, §2.2.2)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from cohabit.pack import Cursor, DataStream, pad_rows  # noqa: E402


pytestmark = pytest.mark.usefixtures("torch_one_thread")


def _ids_stream(n: int, seed: int = 0, chunk: int = 1) -> DataStream:
    # The sample's value is its index, so consumed values tell which samples a member saw.
    return DataStream(torch.arange(n).float()[:, None], torch.arange(n), seed=seed, chunk=chunk)


@settings(max_examples=80, deadline=None)
@given(
    n=st.integers(1, 60),
    sizes=st.lists(st.integers(1, 25), min_size=1, max_size=5),
    steps=st.integers(1, 40),
    seed=st.integers(0, 3),
    absent=st.lists(st.booleans(), min_size=40, max_size=40),
    chunk=st.sampled_from([1, 7, 256]),
    max_buffer=st.sampled_from([None, 10]),
)
def test_no_member_skips_or_repeats_a_sample_within_an_epoch(n, sizes, steps, seed, absent, chunk, max_buffer) -> None:
    stream = DataStream(torch.arange(n).float()[:, None], torch.arange(n), seed=seed, chunk=chunk, max_buffer=max_buffer)
    cursors = [Cursor(b) for b in sizes]
    seen: list[dict[int, list[int]]] = [{} for _ in sizes]
    for k in range(steps):
        # Member 0 is sometimes out of the pack (freed, later loaded again): it keeps its cursor.
        active = [i for i in range(len(sizes)) if not (i == 0 and absent[k] and len(sizes) > 1)]
        before = [(cursors[i].epoch, cursors[i].pos) for i in active]
        batches = stream.take([cursors[i] for i in active])
        for i, (e, pos), b in zip(active, before, batches):
            assert b.size == min(sizes[i], n - pos)
            assert torch.equal(b.x[:, 0].long(), b.y)
            assert torch.equal(b.y, stream.order(e)[pos : pos + b.size])
            seen[i].setdefault(e, []).extend(b.y.tolist())
    for i, per_epoch in enumerate(seen):
        for e, ids in per_epoch.items():
            assert len(ids) == len(set(ids)), f"member {i} repeated a sample in epoch {e}"
            if e < cursors[i].epoch:
                assert sorted(ids) == list(range(n)), f"member {i} skipped samples in epoch {e}"
        assert cursors[i].samples_seen == sum(len(v) for v in per_epoch.values())


@settings(max_examples=30, deadline=None)
@given(n=st.integers(2, 50), b=st.integers(1, 20), steps=st.integers(1, 30))
def test_equal_windows_share_one_load(n, b, steps) -> None:
    stream = _ids_stream(n)
    cursors = [Cursor(b) for _ in range(3)]
    for _ in range(steps):
        out = stream.take(cursors)
        assert out[0].x is out[1].x is out[2].x
    assert stream.loaded_samples == cursors[0].samples_seen


def test_epoch_order_is_deterministic_and_shuffled() -> None:
    a, b = _ids_stream(50, seed=3), _ids_stream(50, seed=3)
    assert torch.equal(a.order(2), b.order(2))
    assert not torch.equal(a.order(0), a.order(1))
    assert sorted(a.order(4).tolist()) == list(range(50))


def test_leader_loads_followers_slice() -> None:
    """The largest batch leads; smaller batches reuse loaded rows (Fig. 2.2)."""
    stream = _ids_stream(100)
    cursors = [Cursor(50), Cursor(20)]
    for _ in range(2):
        stream.take(cursors)
    assert stream.loaded_samples == 100  # the follower's 40 rows were inside the leader's 100
    assert stream.buffered() <= 100


def test_steps_until_and_partial_last_batch() -> None:
    c = Cursor(30)
    assert c.steps_until(100, 100) == 4  # 30 + 30 + 30 + 10
    assert c.steps_until(100, 101) == 5
    stream = _ids_stream(100)
    sizes = [stream.take([c])[0].size for _ in range(4)]
    assert sizes == [30, 30, 30, 10] and c.epoch == 1 and c.pos == 0


def test_read_ahead_loads_in_chunks() -> None:
    stream = _ids_stream(100, chunk=40)
    c = Cursor(10)
    for _ in range(4):
        stream.take([c])
    assert stream.loaded_samples == 40  # one preprocessing call covered four batches


def test_pad_rows_and_errors() -> None:
    x = torch.ones(3, 2)
    p = pad_rows(x, 5)
    assert p.shape == (5, 2) and torch.equal(p[3:], torch.zeros(2, 2))
    assert pad_rows(x, 3) is x
    with pytest.raises(ValueError, match="3 rows down to 2"):
        pad_rows(x, 2)
    with pytest.raises(ValueError, match="batch_size must be a positive integer, got 0"):
        Cursor(0)
    with pytest.raises(ValueError, match="3 vs 2"):
        DataStream(torch.zeros(3, 1), torch.zeros(2))

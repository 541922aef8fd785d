"""load / free and misaligned step counts (Liu ch. 2, §2.1.2, §2.2.3, Fig. 2.3)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from cohabit.pack import Checkpoint, DataStream, Member, free, load, pack  # noqa: E402
from cohabit.pack.models import MLP3, make_digits, preprocess_digits  # noqa: E402

X, Y = make_digits(80, seed=2)


pytestmark = pytest.mark.usefixtures("torch_one_thread")


def _member(name: str, seed: int, bs: int, stream: DataStream, steps: int | None = None, opt: str = "adam") -> Member:
    torch.manual_seed(seed)
    m = MLP3(64, 16, 10)
    o = torch.optim.Adam(m.parameters(), 1e-2) if opt == "adam" else torch.optim.SGD(m.parameters(), 0.05, momentum=0.9)
    return Member(name, m, o, bs, stream=stream, steps=steps)


def _alone(seed: int, bs: int, steps: int, opt: str = "adam") -> nn.Module:
    stream = DataStream(X, Y, seed=1, preprocess=preprocess_digits)
    m = _member("alone", seed, bs, stream, opt=opt)
    for _ in range(steps):
        b = stream.take([m.cursor])[0]
        m.optimizer.zero_grad()
        m.loss(m.model(b.x), b.y).backward()
        m.optimizer.step()
    return m.model


def _close(a: nn.Module, b: nn.Module) -> bool:
    return all(torch.allclose(p, q, atol=1e-5, rtol=1e-4) for p, q in zip(a.parameters(), b.parameters()))


def test_finished_member_is_freed_and_new_one_loaded_without_restarting_others() -> None:
    stream = DataStream(X, Y, seed=1, preprocess=preprocess_digits)
    # Batch 10/20/40 over the same samples need 12/6/3 steps (Fig. 2.3).
    members = [_member("bs10", 0, 10, stream, 12), _member("bs20", 1, 20, stream, 6, "sgd"), _member("bs40", 2, 40, stream, 3)]
    late = _member("late", 3, 20, stream, 5)
    pending = [late]
    freed_at: dict[str, int] = {}
    pm = pack(members)

    def on_free(ckpt: Checkpoint):
        freed_at[ckpt.name] = ckpt.member.steps_done
        return pending.pop() if pending else None

    ckpts = pm.train(on_free=on_free)
    assert [c.name for c in ckpts] == ["bs40", "bs20", "late", "bs10"]
    assert freed_at == {"bs40": 3, "bs20": 6, "late": 5, "bs10": 12}
    assert len(pm) == 0
    for c, (seed, bs, steps, opt) in zip(ckpts, [(2, 40, 3, "adam"), (1, 20, 6, "sgd"), (3, 20, 5, "adam"), (0, 10, 12, "adam")]):
        assert _close(c.member.model, _alone(seed, bs, steps, opt)), c.name
        assert c.member.cursor.samples_seen == bs * steps  # 80 samples: no partial batches here


def test_free_load_round_trip_resumes_exactly(tmp_path) -> None:
    stream = DataStream(X, Y, seed=1, preprocess=preprocess_digits)
    a, b = _member("a", 0, 16, stream), _member("b", 1, 16, stream)
    pm = pack([a, b])
    for _ in range(3):
        pm.step()
    ckpt = pm.remove("a")
    assert ckpt.member is a and len(pm) == 1
    assert not any(p.grad is not None for p in a.model.parameters())
    state = ckpt.state_dict()
    assert state["steps_done"] == 3 and state["cursor"]["samples_seen"] == 48
    ckpt.save(tmp_path / "a.pt")
    saved = torch.load(tmp_path / "a.pt", weights_only=False)
    assert saved["optimizer"]["state"][0]["step"] == 3
    # Train b alone in its pack meanwhile; then load a into a fresh pack and continue.
    for _ in range(2):
        pm.step()
    pm2 = pack([load(ckpt, "cpu")])
    for _ in range(4):
        pm2.step()
    pm2.sync()
    assert _close(a.model, _alone(0, 16, 7))
    pm.sync()
    assert _close(b.model, _alone(1, 16, 5))


def test_free_outside_a_pack_and_errors() -> None:
    stream = DataStream(X, Y, seed=1)
    a = _member("a", 0, 8, stream)
    ck = free(a)
    assert ck.name == "a"
    pm = pack([a])
    with pytest.raises(ValueError, match="inside a pack"):
        free(a)
    with pytest.raises(ValueError, match="already in the pack"):
        pm.add(a)
    with pytest.raises(KeyError, match="no member named 'zz'"):
        pm.remove("zz")
    with pytest.raises(ValueError, match="needs every member to have a step budget"):
        pm.train()
    with pytest.raises(ValueError, match="at least one member"):
        pack([])
    with pytest.raises(ValueError, match="unique"):
        pack([_member("x", 0, 8, stream), _member("x", 1, 8, stream)])
    with pytest.raises(ValueError, match="steps must be >= 0, got -1"):
        _member("neg", 0, 8, stream, steps=-1)


def test_train_with_step_limit_keeps_members() -> None:
    stream = DataStream(X, Y, seed=1, preprocess=preprocess_digits)
    pm = pack([_member("a", 0, 8, stream), _member("b", 1, 8, stream)])
    assert pm.train(steps=2) == []
    assert [m.steps_done for m in pm] == [2, 2]

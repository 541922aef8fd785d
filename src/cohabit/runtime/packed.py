"""Packed real execution: compatible torch jobs trained jointly in ONE process (Liu, Pack, ch. 2).

:meth:`LocalBackend.launch_pack <cohabit.runtime.local.LocalBackend.launch_pack>` calls
:func:`launch_members`. Per device there is one *pack host*: a
``python -m cohabit.runtime.worker --pack`` process whose ``--fd`` socket is a
control channel. Each member job gets its own socketpair, whose worker end is
passed to the host over the control channel (``SCM_RIGHTS``); on it the member
speaks the ordinary worker protocol (``config`` in; ``ready``, ``progress``,
``halted``, ``finished``, ``error`` out; ``halt`` in). So the backend keeps one
``Run`` per member, as for any job, and its polling, halting and restart logic
stays as it is: the member's ``Task.proc`` is a :class:`MemberProc`, which looks
like a process that ends when the member leaves the pack.

In the host (:func:`serve`), every member is its own built-in workload
(``torch-mlp`` / ``torch-cnn``: data, model, seeded epoch batches, counters,
evaluation, checkpoint format), and the pack is a
:class:`cohabit.pack.PackedModel` of their models with ``torch.optim.SGD``
(momentum, weight decay: the workloads' own update rule) optimizers. One step
of the host is one packed step: each member takes *its own* next mini-batch
(``Workload.batch``), members reading the same data and indices share one input
tensor (§2.2.4), and every member ends where it would have alone.

Unpacking (§2.2.3, misaligned step counts): a member that finishes, or is
asked to halt (pause, migration, stop), is removed from the pack (``free``),
saved to *its own* checkpoint in the job's format — so it can resume alone in
an ordinary worker, or in another pack — and its channel is closed; the others
keep training. A new member is loaded into the running pack; under
``LocalBackend(resume=True)`` a member's first start continues from the checkpoint
an earlier (interrupted) run left, as a solo job's does (``cohabit run --resume``).

Device: the host trains on the device the pack holds: its ``CUDA_VISIBLE_DEVICES``
is that GPU's physical id (:class:`~.devices.DeviceMap`), set from the first
member's configuration, and every member's model, optimizer state and data
live on ``cuda:0`` there (on the CPU when torch sees no GPU, with a note);
checkpoints are CPU tensors, so a member resumes alone or in another pack on
any device. A member that
crashes is restarted by the backend alone, from its checkpoint. The host
exits when the backend closes the control channel (the last member left).

Warm pack host (``LocalBackend(prewarm=True)``): a host imports torch, torch.optim
and the torch workloads before it waits for members (~3 s on this machine). After
its first ``launch_pack`` the backend keeps one idle host, spawned for no device
(:func:`replenish_host`), and the next device that needs a host takes it
(:func:`take_warm_host`: pinned to the device's node cores then), so that pack
starts training without the import; a new idle host is then spawned in the
background. An idle host runs at niceness 19 (reset when taken), so its imports
do not slow down the hosts and workers that are training or starting. ``close`` stops the idle one by pid like any other host.
"""

from __future__ import annotations

import math
import os
import select
import socket
import subprocess
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..engine.ledger import Allocation
from ..spec.job import JobSpec
from .channel import Channel, ChannelClosed
from .checkpoint import CheckpointStore
from .devices import ENV, DeviceChoice, device_telemetry, select_device, set_visible
from .procs import Run, Task, thread_env
from .workloads import WorkloadConfig, WorkloadContext, WorkloadError, build

if TYPE_CHECKING:
    from .local import LocalBackend

PACKABLE = ("torch-mlp", "torch-cnn")
"""Built-in workloads a pack host runs (their models are ``nn.Sequential`` trained by SGD)."""


# ------------------------------------------------------------------ backend side
class PackHost:
    """The backend's handle on one pack process (one device)."""

    def __init__(self, device: tuple[int, int] | None, proc: subprocess.Popen[bytes], ctrl: socket.socket,
                 log_path: Path) -> None:
        self.device = device
        self.proc = proc
        self.ctrl = ctrl
        self.log_path = log_path
        self.members: set[str] = set()

    def alive(self) -> bool:
        return self.proc.poll() is None and self.ctrl.fileno() >= 0

    def attach(self) -> Channel:
        """A new member channel; its other end goes to the host process."""
        mine, theirs = socket.socketpair()
        try:
            socket.send_fds(self.ctrl, [b"M"], [theirs.fileno()])
        finally:
            theirs.close()
        return Channel(mine)

    def drop(self, job: str) -> None:
        self.members.discard(job)

    def shutdown(self, grace: float = 5.0) -> None:
        """Close the control channel (the host then exits) and reap the process."""
        try:
            self.ctrl.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            try:
                self.proc.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                pass


class MemberProc:
    """A pack member seen as a process by the backend: it 'exits' (0) when the member has left
    the pack (its channel closed, or the backend dropped it), or with the host's code if the host
    died. ``terminate``/``kill`` drop the member only; the host goes when its last member does."""

    def __init__(self, backend: LocalBackend, host: PackHost, job: str, chan: Channel) -> None:
        self.backend, self.host, self.job, self.chan = backend, host, job, chan
        self.left = False

    @property
    def pid(self) -> int:
        return self.host.proc.pid

    def poll(self) -> int | None:
        rc = self.host.proc.poll()
        if rc is not None:
            return rc
        return 0 if self.left or self.chan.closed else None

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (rc := self.poll()) is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"pack member {self.job}", timeout or 0.0)
            time.sleep(0.01)
        return rc

    def terminate(self) -> None:
        if self.left:
            return
        self.left = True
        self.chan.close()  # the host drops a member whose channel closes (no checkpoint)
        self.host.drop(self.job)
        if not self.host.members:
            release_host(self.backend, self.host)

    kill = terminate


def release_host(backend: LocalBackend, host: PackHost) -> None:
    """Shut ``host`` down and forget it (its last member left)."""
    if backend._pack_hosts.get(host.device) is host:
        del backend._pack_hosts[host.device]
    host.shutdown()
    backend._all_procs.pop(host.proc.pid, None)


IDLE_NICE = 19
"""Niceness of an idle warm host: its imports run on CPU time the training processes leave over."""


def _renice(pid: int, nice: int) -> None:
    """Set the niceness of every thread of ``pid`` (Linux nice is per thread) and, as the host is
    its own session (``start_new_session``), of its scheduler autogroup, which is what competes with
    other sessions when ``kernel.sched_autogroup_enabled`` is on; best effort."""
    try:
        Path(f"/proc/{pid}/autogroup").write_text(f"{nice}\n")
    except OSError:
        pass  # no autogroups here, or not allowed
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        tids = [pid]
    for tid in tids:
        try:
            os.setpriority(os.PRIO_PROCESS, tid, nice)
        except OSError:
            pass  # gone, or not allowed to lower the niceness again: it still works, at lower priority


def _pin(backend: LocalBackend, host: PackHost, device: tuple[int, int]) -> None:
    """Make ``host`` the pack process of ``device``, pinned to the device's node cores."""
    if host.device is None:  # a warm host, niced while idle
        _renice(host.proc.pid, 0)
    host.device = device
    backend._pack_hosts[device] = host
    if backend.cores is not None:
        try:
            os.sched_setaffinity(host.proc.pid, backend.cores[device[0]])
        except OSError:
            pass  # already gone: its members see the closed channel


def _spawn_host(backend: LocalBackend, device: tuple[int, int] | None, threads: int) -> PackHost:
    """Start a pack host for ``device``, or an idle warm one (``device`` None, not pinned)."""
    tag = f"pack-{device[0]}-{device[1]}-{backend._n_spawned}" if device is not None else \
        f"pack-warm-{backend._n_spawned}"
    log_path = backend.log_dir / f"{tag}.log"
    where = f"on {list(device)}" if device is not None else "(warm, idle)"
    env = thread_env(threads)
    if device is not None:  # a warm host learns its device from its first member's configuration
        env[ENV] = backend.devices.of_pack(device)
    proc, ctrl = backend._spawn(env, log_path, f"pack host {where} at t={backend.now():.3f}",
                                "--pack", "--job", tag)
    backend._all_procs[proc.pid] = proc
    host = PackHost(device, proc, ctrl, log_path)
    if device is not None:
        _pin(backend, host, device)
    else:
        _renice(proc.pid, IDLE_NICE)
    return host


def take_warm_host(backend: LocalBackend, device: tuple[int, int]) -> PackHost | None:
    """Hand the idle warm host (if alive) to ``device``; None when there is none."""
    host, backend._warm_pack_host = backend._warm_pack_host, None
    if host is None:
        return None
    if not host.alive():
        host.shutdown(grace=0.5)
        backend._all_procs.pop(host.proc.pid, None)
        return None
    _pin(backend, host, device)
    with open(host.log_path, "ab") as log:
        log.write(f"--- taken by {list(device)} at t={backend.now():.3f}\n".encode())
    return host


def replenish_host(backend: LocalBackend) -> None:
    """Keep one idle warm pack host (``prewarm=True``), importing in the background."""
    if backend.prewarm and not backend._closed and backend._warm_pack_host is None:
        backend._warm_pack_host = _spawn_host(backend, None, 1)


def stop_warm_host(backend: LocalBackend) -> None:
    """Stop the idle warm host, if any (closing its control channel; killed by pid if it lingers)."""
    host, backend._warm_pack_host = backend._warm_pack_host, None
    if host is not None:
        host.shutdown(grace=0.5)
        backend._all_procs.pop(host.proc.pid, None)


def launch_members(backend: LocalBackend, device: tuple[int, int], specs: Sequence[JobSpec],
                   allocs: Sequence[Allocation], *, from_checkpoint: Sequence[bool]) -> None:
    """Load ``specs`` into the pack host of ``device`` (spawning it if there is none)."""
    from .worker import worker_config

    host = backend._pack_hosts.get(device)
    if host is not None and not host.alive():
        release_host(backend, host)
        host = None
    for spec, alloc, restore in zip(specs, allocs, from_checkpoint, strict=True):
        config = backend.begin_launch(spec, alloc)
        if config is None:
            continue
        if config.label not in PACKABLE:
            backend._fail_now(spec.id, f"job {spec.id!r}: workload {config.label!r} cannot be packed; "
                                       f"packable workloads: {', '.join(PACKABLE)}")
            continue
        threads = max(1, math.ceil(spec.workers.demand["cpu"] - 1e-9)) if spec.workers.demand["cpu"] > 0 else 1
        if host is None:
            host = take_warm_host(backend, device) or _spawn_host(backend, device, threads)
        if not restore and backend._resume_point(spec, config) is not None:
            restore = True  # ``resume``: the first start continues from the earlier run's checkpoint
        if not restore:
            backend.store.clear(spec.id)
        run = Run(spec, alloc, config)
        run.launched = backend.now()
        backend._runs[spec.id] = run
        try:
            chan = host.attach()
        except OSError as exc:
            del backend._runs[spec.id]
            backend._fail_now(spec.id, f"pack host on {list(device)} is gone: {exc}")
            continue
        host.members.add(spec.id)
        run.tasks = [Task(0, device[0], MemberProc(backend, host, spec.id, chan), chan,  # type: ignore[arg-type]
                           host.log_path)]
        cfg = worker_config(
            job=spec.id, rank=0, world_size=1, workload=config, iterations=spec.iterations, epochs=spec.epochs,
            batch_size=spec.batch_size, threads=threads, store_root=str(backend.store.root),
            from_checkpoint=restore, report_interval=backend.report_interval,
            checkpoint_interval=backend.checkpoint_interval, fsync=backend.fsync, dist_port=None,
            cuda_visible_devices=backend.devices.of_pack(device),  # every member shares the one device
            report_evaluations=spec.criteria is not None,
        )
        try:
            chan.send(cfg)
        except ChannelClosed:
            pass  # the host died: the backend sees the closed channel
        backend.status[spec.id].pids = (host.proc.pid,)
    if host is not None:
        replenish_host(backend)


# --------------------------------------------------------------------- host side
@dataclass
class _Slot:
    """One member in the host: its channel, configuration, workload and pack member."""

    job: str
    chan: Channel
    cfg: dict[str, Any]
    workload: Any
    member: Any
    data_key: tuple[Any, ...]
    last_ckpt: float = 0.0
    last_ckpt_iter: int | None = None
    win_start: float = 0.0
    win_steps: int = 0
    losses: list[float] = field(default_factory=list)
    latest: dict[str, float] = field(default_factory=dict)
    first_report: bool = True
    halt: dict[str, Any] | None = None


class PackServer:
    """The pack host's loop (see the module docstring)."""

    def __init__(self, ctrl: socket.socket) -> None:
        import torch
        import torch.optim  # noqa: F401 - imported before members arrive (a warm host is ready)

        from ..pack import pack
        from .workloads import torch_models  # noqa: F401

        self.torch = torch
        self._pack = pack
        self.ctrl = ctrl
        self.slots: dict[str, _Slot] = {}
        self.choice: DeviceChoice | None = None  # the pack's one device, chosen with the first member
        self.packed: Any = None
        self.data: dict[tuple[Any, ...], tuple[Any, Any]] = {}

    # ------------------------------------------------------------ members in
    def _accept(self, timeout: float) -> bool:
        """Take new member channels from the control socket; False once the backend closed it."""
        ready, _, _ = select.select([self.ctrl], [], [], timeout)
        if not ready:
            return True
        try:
            msg, fds, _, _ = socket.recv_fds(self.ctrl, 1, 1)
        except OSError:
            return False
        if not msg:
            return False
        for fd in fds:
            self._admit(Channel(socket.socket(fileno=fd)))
        return True

    def _admit(self, chan: Channel) -> None:
        try:
            cfg = chan.recv(timeout=60.0)
        except (TimeoutError, ChannelClosed):
            chan.close()
            return
        job = str(cfg.get("job", "?"))
        try:
            slot = self._build(chan, cfg)
        except WorkloadError as exc:
            self._fatal(chan, str(exc))
            return
        except Exception as exc:  # noqa: BLE001 - report anything building raised, as the worker does
            self._fatal(chan, f"building workload {cfg['workload']['label']!r} for the pack failed: "
                              f"{type(exc).__name__}: {exc}", traceback.format_exc(limit=4))
            return
        self.slots[job] = slot
        if self.packed is None:
            self.packed = self._pack([slot.member], self.device)
        else:
            self.packed.add(slot.member)
        slot.win_start = slot.last_ckpt = time.perf_counter()
        self._send(slot, {"type": "ready", "iteration": slot.workload.iteration,
                          "total": slot.workload.total_iterations, "pid": os.getpid(),
                          "restored_iteration": slot.last_ckpt_iter, "packed_with": sorted(self.slots),
                          **(self.choice.report() if self.choice is not None else {})})

    def _build(self, chan: Channel, cfg: dict[str, Any]) -> _Slot:
        torch = self.torch
        from ..pack import Member

        w = cfg["workload"]
        wc = WorkloadConfig(w["target"], w["label"], int(w["seed"]), dict(w["params"]))
        if wc.label not in PACKABLE:
            raise WorkloadError(f"job {cfg['job']!r}: workload {wc.label!r} cannot be packed")
        torch.set_num_threads(max(int(cfg["threads"]), 1))
        if self.choice is None:  # the first member: this host's device (the backend gives every member the same)
            visible = cfg.get("cuda_visible_devices")
            note = set_visible(visible)
            choice = select_device(visible)
            self.choice = DeviceChoice(choice.device, choice.visible, note or choice.note)
        ctx = WorkloadContext(job=cfg["job"], seed=wc.seed, iterations=cfg["iterations"], epochs=cfg["epochs"],
                              batch_size=cfg["batch_size"], rank=0, world_size=1, threads=int(cfg["threads"]),
                              device=self.device)
        wl = build(wc, ctx)
        last = None
        if cfg["from_checkpoint"]:
            got = self._store(cfg).load(cfg["job"])
            if got is not None:
                wl.load_state_dict(got[0]["workload"])
                last = got[1].iteration
        hyper = ("lr", "momentum", "weight_decay", "batch_size")
        key = (wc.label, wc.seed, tuple(sorted((k, repr(v)) for k, v in wc.params.items() if k not in hyper)))
        if key in self.data:  # same data: share one copy, so equal batches are one input (§2.2.4)
            wl.X, wl.y = self.data[key]
        else:
            self.data[key] = (wl.X, wl.y)
        opt = torch.optim.SGD(wl.model.parameters(), lr=wl.lr, momentum=wl.momentum, weight_decay=wl.weight_decay)
        if wl.momentum:
            for p, buf in zip(wl.model.parameters(), wl.momentum_buf):
                opt.state[p]["momentum_buffer"] = buf.clone()
        member = Member(cfg["job"], wl.model, opt, batch_size=wl.batch_size)
        return _Slot(cfg["job"], chan, cfg, wl, member, key, last_ckpt_iter=last)

    @property
    def device(self) -> str:
        """Where the pack trains (``cuda:0`` or ``cpu``)."""
        return self.choice.device if self.choice is not None else "cpu"

    @staticmethod
    def _store(cfg: dict[str, Any]) -> CheckpointStore:
        return CheckpointStore(cfg["store_root"], keep=int(cfg["keep"]), fsync=bool(cfg["fsync"]))

    def _fatal(self, chan: Channel, reason: str, tb: str | None = None) -> None:
        msg: dict[str, Any] = {"type": "error", "fatal": True, "reason": reason, "rank": 0}
        if tb:
            msg["traceback"] = tb
        try:
            chan.send(msg)
        except ChannelClosed:
            pass
        chan.close()

    # ----------------------------------------------------------- members out
    def _save(self, slot: _Slot, opt_state: dict[int, dict[str, Any]]) -> int:
        """Write the member's momentum back into its workload and save the job's own checkpoint."""
        wl = slot.workload
        with self.torch.no_grad():
            for i, buf in enumerate(wl.momentum_buf):
                got = opt_state.get(i, {}).get("momentum_buffer")
                if got is not None:
                    buf.copy_(got)
        info = self._store(slot.cfg).save(slot.job, {"workload": wl.state_dict()}, iteration=wl.iteration,
                                          workload=slot.cfg["workload"]["label"])
        slot.last_ckpt_iter = info.iteration
        return info.seq

    def _leave(self, slot: _Slot, kind: str | None) -> None:
        """Free the member (``free``, §2.2.3); ``kind`` "halted"/"finished" saves and reports it first."""
        ckpt = self.packed.remove(slot.member)
        del self.slots[slot.job]
        if kind is not None:
            t0 = time.perf_counter()
            seq = self._save(slot, ckpt.member.optimizer.state_dict()["state"])
            msg: dict[str, Any] = {"type": kind, "iterations": slot.workload.iteration, "checkpoint_seq": seq,
                                   "save_s": time.perf_counter() - t0}
            if kind == "halted":
                msg["iteration"] = slot.workload.iteration
            else:
                final = dict(slot.latest)
                if slot.losses:
                    final["loss"] = sum(slot.losses) / len(slot.losses)
                msg["metrics"] = final or slot.workload.evaluate()
            self._send(slot, msg)
        slot.chan.close()

    def _checkpoint_due(self, now: float) -> None:
        due = [s for s in self.slots.values()
               if float(s.cfg["checkpoint_interval"]) > 0 and now - s.last_ckpt >= float(s.cfg["checkpoint_interval"])
               and not s.workload.done]
        if not due:
            return
        self.packed.sync()  # every member's optimizer holds its current state again
        for s in due:
            self._save(s, s.member.optimizer.state_dict()["state"])
            s.last_ckpt = time.perf_counter()

    # ------------------------------------------------------------------ loop
    def run(self) -> int:
        while True:
            if not self._accept(0.0 if self.slots else 1.0):
                for s in list(self.slots.values()):  # the backend went away: drop everyone
                    self._leave(s, None)
                return 0
            for s in list(self.slots.values()):
                for msg in s.chan.recv_ready():
                    if msg.get("type") == "halt":
                        s.halt = msg
                if s.halt is not None:
                    self._leave(s, "halted" if s.halt.get("checkpoint", True) else None)
                elif s.chan.closed:
                    self._leave(s, None)  # the backend dropped it
                elif s.workload.done:
                    self._leave(s, "finished")
            if not self.slots:
                continue
            self._step()

    def _step(self) -> None:
        slots = list(self.slots.values())
        t0 = time.perf_counter()
        batches = []
        shared: dict[tuple[Any, ...], tuple[Any, Any]] = {}
        for s in slots:
            wl = s.workload
            idx = wl.batch(wl.iteration)
            key = (s.data_key, idx.tobytes())
            if key not in shared:
                t = self.torch.from_numpy(idx).to(self.device)
                shared[key] = (wl.X[t], wl.y[t])
            batches.append(shared[key])
        by_name = {m.name: b for m, b in zip([s.member for s in slots], batches)}
        losses = self.packed.step([by_name[m.name] for m in self.packed.members])
        t1 = time.perf_counter()
        for m, loss in zip(self.packed.members, losses.tolist()):
            s = self.slots[m.name]
            wl = s.workload
            wl.iteration += 1
            s.losses.append(float(loss))
            if wl.iteration % wl.iters_per_epoch == 0 or wl.done:
                s.latest.update(wl.evaluate())
                s.latest["epoch"] = float(wl.iteration / wl.iters_per_epoch)
            s.win_steps += 1
            self._report(s, t1, t1 - t0)
        self._checkpoint_due(time.perf_counter())

    def _report(self, s: _Slot, now: float, step_s: float) -> None:
        elapsed = now - s.win_start
        every = float(s.cfg["report_interval"])
        if not (elapsed >= every or (s.first_report and s.win_steps >= 3 and elapsed >= min(0.1, every))):
            return
        out = dict(s.latest)
        if s.losses:
            out["loss"] = sum(s.losses) / len(s.losses)
        from .worker import rss_mb

        self._send(s, {"type": "progress", "iterations": s.workload.iteration, "total": s.workload.total_iterations,
                       "iter_time": elapsed / s.win_steps, "compute_s": elapsed / s.win_steps, "comm_s": 0.0,
                       "metrics": out, "mem_mb": rss_mb(), "checkpoint_iteration": s.last_ckpt_iter,
                       "packed_with": sorted(self.slots), "step_s": step_s, **device_telemetry(self.device)})
        s.win_start, s.win_steps, s.losses, s.first_report = now, 0, [], False

    @staticmethod
    def _send(slot: _Slot, msg: dict[str, Any]) -> None:
        msg.setdefault("rank", 0)
        try:
            slot.chan.send(msg)
        except ChannelClosed:
            pass


def serve(ctrl: socket.socket) -> int:
    """Entry of ``python -m cohabit.runtime.worker --pack``: run the pack host on control socket ``ctrl``."""
    return PackServer(ctrl).run()

"""The task process: runs one task of a job, checkpoints it, and reports telemetry.

Started by :class:`~cohabit.runtime.local.LocalBackend` as
``python -m cohabit.runtime.worker --fd N`` where ``N`` is its end of a
socketpair (:mod:`.channel`, JSON lines). The first message it reads is its
configuration (see :func:`worker_config`); with ``--preload torch|numpy`` it
imports the workload modules first and then waits for a configuration as long
as the socket is open (a warm spare: a resume then skips the ~1.3 s torch
import). Then:

1. build the workload (:func:`cohabit.runtime.workloads.build`); when asked
   to, restore the newest good checkpoint of the job from the store;
2. loop over iterations; at every iteration boundary read control messages —
   ``{"type": "halt", "checkpoint": true}`` makes it save a checkpoint and exit
   0 (a pause / migration / resize), ``"checkpoint": false`` just exits;
3. save a checkpoint every ``checkpoint_interval`` seconds (so a crash loses
   at most that much work) and at the end;
4. report ``progress`` after the first iteration and then every
   ``report_interval`` seconds: iterations done, measured seconds per
   iteration (wall time of the window / iterations), of which compute and
   communication, the mean mini-batch ``loss`` and the latest other metrics,
   resident memory (MB), on a GPU the peak device memory (``device_mem_mb``) and the
   iteration of the newest checkpoint;
5. on completion send ``finished`` and exit 0.

Messages it sends: ``ready`` (after restore), ``progress``, ``checkpoint``
is folded into progress, ``halted``, ``finished``, ``error`` (``fatal``: the
configuration or workload is wrong, retrying cannot help).

A configuration with a ``ps`` section is a task of a parameter-server job:
it runs :func:`cohabit.runtime.ps.task.run_task` instead of this loop.

Data-parallel jobs (``world_size > 1``): every rank runs this loop; gradients
are averaged with gloo all-reduce over 127.0.0.1 (:class:`GlooComm`); a halt
request seen by any rank is agreed on by an all-reduce of a flag, so all
ranks stop at the same iteration boundary; rank 0 writes the checkpoints. A
workload whose ranks hold different state (``per_rank_state``: the stages of a
model-parallel ``torch-pipeline`` job) has every rank write its own
(:func:`~.workloads.torch_pipeline.stage_key`), periodic ones at a boundary the
ranks agree on, and restore its own.

If the scheduler goes away (the socket closes), the task exits.
"""

from __future__ import annotations

import time

_T_MODULE = time.time()  # before the heavy imports below: splits start-up into interpreter and imports

import argparse
import base64
import hashlib
import os
import socket
import sys
import traceback
from pathlib import Path
from typing import Any

from .channel import Channel, ChannelClosed
from . import safestate
from .checkpoint import CheckpointStore
from .devices import ENV, DeviceChoice, device_telemetry, select_device, set_visible
from .workloads import BUILTINS, Trainable, WorkloadConfig, WorkloadContext, WorkloadError, build
from .workloads.torch_pipeline import stage_key

EXIT_OK, EXIT_CONFIG, EXIT_NO_CONFIG = 0, 3, 4
_STOP, _STOP_CKPT = 1, 2


def worker_config(
    *, job: str, rank: int, world_size: int, workload: WorkloadConfig, iterations: int | None,
    epochs: int | None, batch_size: int | None, threads: int, store_root: str, from_checkpoint: bool,
    report_interval: float, checkpoint_interval: float, keep: int = 2, fsync: bool = True,
    dist_port: int | None = None, cuda_visible_devices: str | None = None, mem_gb: float | None = None,
    checkpoint_policy: str = "fixed", report_evaluations: bool = False,
) -> dict[str, Any]:
    """The configuration message a worker expects (JSON-serialisable).

    ``checkpoint_policy``: ``"fixed"`` (every ``checkpoint_interval`` s) or ``"ratchet"``
    (:class:`cohabit.ratchet.CheckpointTrigger`: at the overhead bound from measured costs, the
    first after ``checkpoint_interval`` s). ``report_evaluations``: report at every evaluation (epoch
    end) as well as every ``report_interval`` s: set for jobs with a completion criterion, which is
    judged on each epoch's accuracy (an epoch of a small job can last a millisecond: reporting each
    one for every job would flood the record). ``cuda_visible_devices``: the physical GPU ids of the task's devices (``""``: none; None: leave the
    environment as it is), set before CUDA is initialised (:mod:`cohabit.runtime.devices`)."""
    return {
        "type": "config", "job": job, "rank": rank, "world_size": world_size,
        "workload": {"target": workload.target, "label": workload.label, "seed": workload.seed,
                     "params": workload.params},
        "iterations": iterations, "epochs": epochs, "batch_size": batch_size, "threads": threads,
        "store_root": store_root, "from_checkpoint": from_checkpoint, "report_interval": report_interval,
        "checkpoint_interval": checkpoint_interval, "keep": keep, "fsync": fsync, "dist_port": dist_port,
        "cuda_visible_devices": cuda_visible_devices, "mem_gb": mem_gb, "checkpoint_policy": checkpoint_policy,
        "report_evaluations": report_evaluations,
    }


def rss_mb() -> float:
    """Resident memory of this process in MB (Linux /proc; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


#: The interface gloo binds (one machine: data-parallel ranks never listen on an external address).
LOOPBACK_IFNAME = "lo"


def rendezvous_path(store_root: str, job: str, launch_key: int) -> str:
    """The FileStore of one launch of a data-parallel job: next to its checkpoints, unique per launch."""
    digest = hashlib.sha256(job.encode()).hexdigest()[:16]
    return str(Path(store_root).parent / "rendezvous" / f"{digest}-{launch_key}")


class GlooComm:
    """All-reduce over gloo on the loopback interface for the ranks of one data-parallel job.

    The ranks meet through a file (``torch.distributed.FileStore`` at
    ``rendezvous``, unique per launch, under the job's private directory), so
    no rendezvous server listens on any port; gloo's own pair sockets bind the
    loopback interface only (``GLOO_SOCKET_IFNAME=lo``), never all interfaces.
    """

    def __init__(self, rendezvous: str, rank: int, world_size: int, timeout_s: float = 60.0) -> None:
        from datetime import timedelta

        import torch
        import torch.distributed as dist

        self._torch, self._dist = torch, dist
        self.world_size = world_size
        os.environ["GLOO_SOCKET_IFNAME"] = LOOPBACK_IFNAME
        Path(rendezvous).parent.mkdir(parents=True, exist_ok=True)
        store = dist.FileStore(rendezvous, world_size)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size,
                                timeout=timedelta(seconds=timeout_s))
        self.seconds = 0.0  # total time spent communicating

    def allreduce_mean(self, arrays: list[Any]) -> None:
        """Average ``arrays`` (torch tensors or numpy arrays, one dtype) across ranks, in place."""
        torch = self._torch
        t0 = time.perf_counter()
        tensors = [a if isinstance(a, torch.Tensor) else torch.from_numpy(a) for a in arrays]
        flat = torch.cat([t.reshape(-1) for t in tensors]).cpu()  # gloo reduces host memory (GPU grads staged)
        self._dist.all_reduce(flat)
        flat /= self.world_size
        o = 0
        for t in tensors:
            n = t.numel()
            t.copy_(flat[o:o + n].view_as(t))
            o += n
        self.seconds += time.perf_counter() - t0

    def agree(self, flag: int) -> int:
        """The largest ``flag`` of all ranks (a stop request anywhere stops everyone here)."""
        t0 = time.perf_counter()
        t = self._torch.tensor([flag], dtype=self._torch.int64)
        self._dist.all_reduce(t, op=self._dist.ReduceOp.MAX)
        self.seconds += time.perf_counter() - t0
        return int(t.item())

    def close(self) -> None:
        try:
            self._dist.destroy_process_group()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


class Worker:
    """One task's training loop (see the module docstring)."""

    def __init__(self, chan: Channel, cfg: dict[str, Any]) -> None:
        self.chan = chan
        self.cfg = cfg
        self.job: str = cfg["job"]
        self.rank: int = int(cfg["rank"])
        self.world: int = int(cfg["world_size"])
        self.store = CheckpointStore(cfg["store_root"], keep=int(cfg["keep"]), fsync=bool(cfg["fsync"]))
        self.comm: GlooComm | None = None
        self.last_ckpt_iter: int | None = None
        self.halt_req: dict[str, Any] | None = None
        self.share_req: dict[str, Any] | None = None  # the newest SetShare not yet applied
        self.warmup_s: float | None = None
        self.startup: dict[str, Any] = {}  # interpreter_s, imports_s (set by main); accelerator_ids (Ray)
        self.device: str = "cpu"  # where the workload trains (select_device)
        self.per_rank = False  # every rank saves its own state (model-parallel stages), not rank 0 alone
        self.key = self.job  # this rank's checkpoint key

    # ------------------------------------------------------------ setup
    def _build(self) -> tuple[Trainable, dict[str, Any]]:
        cfg = self.cfg
        w = cfg["workload"]
        wc = WorkloadConfig(w["target"], w["label"], int(w["seed"]), dict(w["params"]))
        threads = max(int(cfg["threads"]), 1)
        visible = cfg.get("cuda_visible_devices")
        env_note = set_visible(visible)  # before anything initialises CUDA (a warm spare was spawned without it)
        t_torch = time.perf_counter()
        choice = DeviceChoice("cpu", os.environ.get(ENV), f"workload {wc.label!r} does not use torch: it runs "
                              f"on the CPU" if visible else None)
        if wc.uses_torch or self.world > 1 or (visible and wc.label not in BUILTINS):
            import torch

            torch.set_num_threads(threads)
            choice = select_device(visible)
        if env_note:
            choice = DeviceChoice(choice.device, choice.visible, env_note)
        self.device = choice.device
        torch_s = time.perf_counter() - t_torch
        ctx = WorkloadContext(job=self.job, seed=wc.seed, iterations=cfg["iterations"], epochs=cfg["epochs"],
                              batch_size=cfg["batch_size"], rank=self.rank, world_size=self.world, threads=threads,
                              device=choice.device, mem_gb=cfg.get("mem_gb"))
        t_build = time.perf_counter()
        workload = build(wc, ctx)
        if getattr(workload, "per_rank_state", False):
            self.per_rank, self.key = True, stage_key(self.job, self.rank)
            if not cfg["from_checkpoint"] and self.rank > 0:
                self.store.clear(self.key)  # a fresh start: no stage restores an old run (the backend clears rank 0's)
        info: dict[str, Any] = {"torch_import_s": torch_s, "build_s": time.perf_counter() - t_build,
                                "restored_iteration": None, **choice.report()}
        if self.world > 1:
            self.comm = GlooComm(rendezvous_path(cfg["store_root"], self.job, int(cfg["dist_port"])), self.rank,
                                 self.world)
            workload.comm = self.comm  # type: ignore[attr-defined]
        if cfg["from_checkpoint"] and cfg.get("state_b64"):  # a paused state the backend held in memory
            t0 = time.perf_counter()
            state = safestate.loads(base64.b64decode(cfg["state_b64"]))
            workload.load_state_dict(state["workload"])
            info.update(restored_iteration=workload.iteration, restored_from="memory",
                        restore_s=time.perf_counter() - t0)
        elif cfg["from_checkpoint"]:
            t0 = time.perf_counter()
            got = self.store.load(self.key)
            info["skipped_corrupt"] = list(self.store.last_errors)  # reported by the backend, never silent
            if got is not None:
                state, ck = got
                workload.load_state_dict(state["workload"])
                self.last_ckpt_iter = ck.iteration
                info.update(restored_iteration=ck.iteration, restored_seq=ck.seq)
            else:
                info["from_scratch"] = True
            info["restore_s"] = time.perf_counter() - t0
        return workload, info

    def _apply_share(self, workload: Trainable, msg: dict[str, Any]) -> None:
        """A new share from the scheduler (``SetShare``): the workload's ``set_share(threads, mem_gb)``
        if it has one (a progressive query: DuckDB's threads and memory limit); a workload without
        it keeps the threads it started with."""
        threads = max(1, int(msg.get("threads") or 1))
        mem_gb = msg.get("mem_gb")
        set_share = getattr(workload, "set_share", None)
        if callable(set_share):
            set_share(threads=threads, mem_gb=float(mem_gb) if mem_gb else None)

    @staticmethod
    def _state_blob(workload: Trainable) -> tuple[str, float]:
        """The checkpoint the store would write (``{"workload": state}``), serialised and base64-encoded
        for the channel, and the seconds it took (a pause whose state the backend keeps: Ratchet's tiers)."""
        t0 = time.perf_counter()
        blob = base64.b64encode(safestate.dumps({"workload": workload.state_dict()})).decode("ascii")
        return blob, time.perf_counter() - t0

    def _save(self, workload: Trainable) -> tuple[int, float]:
        t0 = time.perf_counter()
        info = self.store.save(self.key, {"workload": workload.state_dict()}, iteration=workload.iteration,
                               workload=self.cfg["workload"]["label"])
        self.last_ckpt_iter = info.iteration
        return info.seq, time.perf_counter() - t0

    def _stop_flag(self) -> int:
        for msg in self.chan.recv_ready():
            if msg.get("type") == "halt":
                self.halt_req = msg
            elif msg.get("type") == "share":
                self.share_req = msg  # applied before the next step (a batch boundary)
        if self.chan.closed and self.halt_req is None:
            self.halt_req = {"type": "halt", "checkpoint": False, "why": "scheduler went away"}
        if self.halt_req is None:
            return 0
        return _STOP_CKPT if self.halt_req.get("checkpoint", True) else _STOP

    # ------------------------------------------------------------- loop
    def run(self) -> int:
        try:
            workload, info = self._build()
        except WorkloadError as exc:
            self._send({"type": "error", "fatal": True, "reason": str(exc)})
            return EXIT_CONFIG
        except Exception as exc:  # noqa: BLE001 - report anything the user's code raises
            tb = traceback.format_exc(limit=4)
            self._send({"type": "error", "fatal": True,
                        "reason": f"building workload {self.cfg['workload']['label']!r} failed: "
                                  f"{type(exc).__name__}: {exc}", "traceback": tb})
            return EXIT_CONFIG
        self._send({"type": "ready", "iteration": workload.iteration, "total": workload.total_iterations,
                    "pid": os.getpid(), **self.startup, **info})
        try:
            return self._loop(workload)
        except Exception as exc:  # noqa: BLE001 - a crash in the user's step(): report it, let the backend retry
            self._send({"type": "error", "fatal": False, "reason": f"{type(exc).__name__}: {exc}",
                        "traceback": traceback.format_exc(limit=6)})
            traceback.print_exc()
            self._close()
            return 1

    def _loop(self, workload: Trainable) -> int:
        report_every = float(self.cfg["report_interval"])
        ckpt_every = float(self.cfg["checkpoint_interval"])
        now = time.perf_counter()
        win_start, win_steps, win_compute, win_comm = now, 0, 0.0, 0.0
        losses: list[float] = []
        latest: dict[str, float] = {}
        last_ckpt = run_start = now
        warm = True  # the first iteration (allocations, lazy init) is timed apart: it is not typical
        first_report = True
        each = bool(getattr(workload, "report_each_step", False))  # progressive queries: every batch counts
        evaluations = bool(self.cfg.get("report_evaluations", False))  # a completion criterion judges each
        trigger = None
        if self.cfg.get("checkpoint_policy") == "ratchet" and ckpt_every > 0:
            from ..ratchet.trigger import CheckpointTrigger

            trigger = CheckpointTrigger(first_after_s=ckpt_every)
        step_s = 0.0  # running mean of the step time, for the remaining work
        while True:
            c0 = self.comm.seconds if self.comm is not None else 0.0  # the stop agreement is communication too
            ta = time.perf_counter()
            flag = self._stop_flag()
            if self.comm is not None:
                flag = self.comm.agree(flag)
            if flag:
                msg: dict[str, Any] = {"type": "halted", "iteration": workload.iteration}
                if flag == _STOP_CKPT and self.rank == 0 and self.halt_req and self.halt_req.get("state_to_backend"):
                    msg["state_b64"], msg["save_s"] = self._state_blob(workload)  # Ratchet's tiers keep it
                elif flag == _STOP_CKPT and (self.rank == 0 or self.per_rank):
                    msg["checkpoint_seq"], msg["save_s"] = self._save(workload)
                self._send(msg)
                self._close()
                return EXIT_OK
            if workload.done:
                break
            if self.share_req is not None:
                self._apply_share(workload, self.share_req)
                self.share_req = None
            t0 = time.perf_counter()
            metrics = workload.step()
            t1 = time.perf_counter()
            comm = (self.comm.seconds - c0) if self.comm is not None else 0.0
            win_steps += 1
            win_comm += comm
            win_compute += (t1 - ta) - comm
            if "loss" in metrics:
                losses.append(float(metrics["loss"]))
            latest.update({k: float(v) for k, v in metrics.items() if k != "loss"})
            step_s += ((t1 - t0) - step_s) / min(workload.iteration, 20) if workload.iteration else 0.0
            if trigger is not None:
                due = trigger.due(t1 - last_ckpt, (workload.total_iterations - workload.iteration) * step_s,
                                  elapsed_s=t1 - run_start)
            else:
                due = ckpt_every > 0 and t1 - last_ckpt >= ckpt_every
            if self.per_rank and self.comm is not None:  # every stage saves at the same boundary
                due = bool(self.comm.agree(int(due)))
            if (self.rank == 0 or self.per_rank) and due and not workload.done:
                _, save_s = self._save(workload)
                if trigger is not None:
                    trigger.record_cost(save_s)
                last_ckpt = time.perf_counter()
            if warm and each:
                warm = False
                self.warmup_s = t1 - t0
            if warm:
                warm = False
                self.warmup_s = t1 - t0
                win_start, win_steps, win_compute, win_comm = time.perf_counter(), 0, 0.0, 0.0
                continue
            # the first report waits for a few typical iterations (>= 3 and >= 0.1 s) so the
            # scheduler's first speed estimate is not a cold-cache outlier
            elapsed = t1 - win_start
            evaluated = each or (evaluations and "epoch" in metrics)  # each batch / each evaluation counts
            if (evaluated or elapsed >= report_every
                    or (first_report and win_steps >= 3 and elapsed >= min(0.1, report_every))):
                t_now = time.perf_counter()
                out = dict(latest)
                if losses:
                    out["loss"] = sum(losses) / len(losses)
                self._send({
                    "type": "progress", "iterations": workload.iteration, "total": workload.total_iterations,
                    "iter_time": (t_now - win_start) / win_steps, "compute_s": win_compute / win_steps,
                    "comm_s": win_comm / win_steps, "metrics": out, "mem_mb": rss_mb(),
                    "checkpoint_iteration": self.last_ckpt_iter, "warmup_s": self.warmup_s,
                    "evaluation": bool(evaluated),  # the backend passes each of these on, never folds them
                    **device_telemetry(self.device),
                })
                win_start, win_steps, win_compute, win_comm = t_now, 0, 0.0, 0.0
                losses = []
                first_report = False
        seq = None
        if self.rank == 0 or self.per_rank:
            seq, _ = self._save(workload)
        final = dict(latest)
        if losses:
            final["loss"] = sum(losses) / len(losses)
        evaluate = getattr(workload, "evaluate", None)
        if callable(evaluate) and not final:
            final.update(evaluate())
        self._send({"type": "finished", "iterations": workload.iteration, "metrics": final, "checkpoint_seq": seq,
                    "mem_mb": rss_mb(), **device_telemetry(self.device)})
        self._close()
        return EXIT_OK

    def _send(self, msg: dict[str, Any]) -> None:
        msg.setdefault("rank", self.rank)
        try:
            self.chan.send(msg)
        except ChannelClosed:
            pass  # the scheduler is gone; the loop notices at the next boundary

    def _close(self) -> None:
        if self.comm is not None:
            self.comm.close()
        self.chan.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cohabit.runtime.worker", description=__doc__.splitlines()[0])
    parser.add_argument("--fd", type=int, required=True, help="file descriptor of the control socket")
    parser.add_argument("--job", default="?", help="job id (informational: shows in ps)")
    parser.add_argument("--launched-at", type=float, default=None, help="time.time() when the parent spawned us")
    parser.add_argument("--preload", choices=("none", "numpy", "torch"), default="none",
                        help="import the workload modules now and wait for a configuration (a warm spare)")
    parser.add_argument("--pack", action="store_true",
                        help="be a pack host: --fd is a control socket passing member channels (runtime.packed)")
    args = parser.parse_args(argv)
    if args.pack:
        from .packed import serve

        return serve(socket.socket(fileno=args.fd))
    if args.preload == "torch":
        import torch  # noqa: F401

        from .workloads import torch_models  # noqa: F401
    if args.preload in ("numpy", "torch"):
        from .workloads import numpy_models  # noqa: F401
    t_main = time.time()
    startup = {"interpreter_s": _T_MODULE - args.launched_at, "imports_s": t_main - _T_MODULE} \
        if args.launched_at is not None else {}
    return serve_task(Channel(socket.socket(fileno=args.fd)), 60.0 if args.preload == "none" else 365 * 86400.0,
                      startup)


def serve_task(chan: Channel, timeout: float, startup: dict[str, Any]) -> int:
    """Wait up to ``timeout`` s for the configuration on ``chan``, then run the task; the exit code.

    Shared by the task process (:func:`main`) and the Ray actor (:mod:`.ray_backend`). ``startup``:
    start-up times to report (``interpreter_s``, ``imports_s``), possibly empty.
    """
    try:
        cfg = chan.recv(timeout=timeout)
    except (TimeoutError, ChannelClosed):
        return EXIT_NO_CONFIG
    if cfg.get("type") != "config":
        return EXIT_NO_CONFIG
    if "ps" in cfg:  # a parameter-server job's server or worker
        from .ps.task import run_task

        set_visible(cfg.get("cuda_visible_devices"))

        return run_task(chan, cfg, startup)
    worker = Worker(chan, cfg)
    worker.startup = startup
    return worker.run()


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Checkpoints are fsync'ed and the last message is sent: skip interpreter teardown, which takes
    # ~0.5 s with torch loaded and would be paid by every pause, migration and resize.
    os._exit(code)

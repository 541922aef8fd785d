"""Profile the pack primitive: IMPV (Eq. 2.3), peak memory, SwOH (Eq. 2.4), Table 2.2 ablation.

Liu, ch. 2, §2.3.  For n = 2, 4, 8 models (MLP-3 and a small CNN) and batch
sizes 32..128 it measures the time of one training step of each model alone
(T_s(Model i); their sum is T_s(Seq), Eq. 2.1) and of the packed model
(T_s(Pack), Eq. 2.2), and reports IMPV = (T_s(Seq) - T_s(Pack)) / T_s(Seq).
Seq and Pack are measured interleaved; the table uses the fastest of the
repeats (the JSON also has the medians).  Times are process CPU time
(``--clock wall`` for wall time): with one intra-op thread they equal wall
time on an idle machine, and unlike wall time they do not count the time
other processes take on a shared one.  On CUDA (``--device cuda``, which stops
with a clear message when torch sees no GPU) the default clock is wall time.
A step includes taking the batch from the stream and, unless disabled,
preprocessing it (decode + augmentation), as in Fig. 2.1.  Every member uses
Adam with its own learning rate.  Peak memory is the §2.3.4 estimate and the
measured peak of one step (see cohabit.pack.memory.measure_step_peak).

SwOH(n) = T_e(Seq) - sum_i T_e(Model i) (Eq. 2.4): T_e(Seq) trains the n
models one after the other for one epoch each, including what switching
costs (restore the model from its checkpoint, build its optimizer, load it on
the device, free/checkpoint it afterwards); T_e(Model i) is the epoch of
model i alone with the model already resident.

The ablation packs two models and varies the five factors of Table 2.2: same
or different model, data, preprocessing, optimizer and batch size.

Usage: python bench/pack_step.py [--quick] [--threads 1] [--json bench/results/pack_step.json]
       python bench/pack_step.py --export-profile bench/results/pack_step.json
           (writes the IMPV rows as the simulator's pack profile,
           src/cohabit/data/profiles/pack_step_<device>.csv, read by cohabit.sim.profiles.pack)
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from cohabit.pack import DataStream, Member, estimate_pack, free, load, measure_step_peak, pack  # noqa: E402
from cohabit.pack.models import make_digits, make_model, preprocess_digits  # noqa: E402
from cohabit.runtime.devices import torch_device  # noqa: E402

MiB = 2**20


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


CLOCK = time.process_time
"""CPU time of this process by default: on a shared machine other processes inflate wall time."""


def per_step(fn: Callable[[], object], steps: int, warmup: int, device: torch.device) -> float:
    """Seconds per call of ``fn`` on :data:`CLOCK` (first calls are warm-up, as in §2.3.1)."""
    for _ in range(warmup):
        fn()
    _sync(device)
    t = CLOCK()
    for _ in range(steps):
        fn()
    _sync(device)
    return (CLOCK() - t) / steps


class Setup:
    """Raw data (uint8 images) and pre-decoded data for the 'no preprocessing' case."""

    def __init__(self, n: int, side: int, device: torch.device) -> None:
        self.raw, self.y = make_digits(n, side=side, seed=0)
        self.decoded = preprocess_digits(self.raw, torch.arange(n), 0, augment=False)
        self.side = side
        self.device = device

    def stream(self, seed: int, preprocess: bool) -> DataStream:
        if preprocess:
            return DataStream(self.raw, self.y, seed=seed, preprocess=preprocess_digits, device=self.device)
        return DataStream(self.decoded, self.y, seed=seed, device=self.device)


def make_member(name: str, arch: str, opt: str, lr: float, bs: int, stream: DataStream, seed: int, side: int) -> Member:
    torch.manual_seed(seed)
    model = make_model(arch, side=side)
    if opt == "adam":
        o: torch.optim.Optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    elif opt == "momentum":
        o = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    else:
        raise ValueError(f"unknown optimizer {opt!r}")
    return Member(name, model, o, bs, stream=stream)


def alone_step(m: Member, device: torch.device) -> Callable[[], None]:
    """A plain PyTorch training step of one model on its own stream."""
    load(m, device)
    stream = m.stream
    assert stream is not None

    def step() -> None:
        b = stream.take([m.cursor])[0]
        m.optimizer.zero_grad(set_to_none=True)
        m.loss(m.model(b.x), b.y).backward()
        m.optimizer.step()

    return step


def measure(specs: list[dict], setup: Setup, *, steps: int, warmup: int, repeats: int) -> dict:
    """T_s(Seq) (Eq. 2.1), T_s(Pack) (Eq. 2.2), IMPV (Eq. 2.3) and memory for one pack."""
    dev = setup.device

    def build() -> list[Member]:
        streams: dict[tuple, DataStream] = {}
        out = []
        for i, s in enumerate(specs):
            key = (s["data"], s["pre"])
            st = streams.get(key) or streams.setdefault(key, setup.stream(s["data"], s["pre"]))
            out.append(make_member(f"m{i}", s["arch"], s["opt"], s["lr"], s["bs"], st, i, setup.side))
        return out

    seq_members = build()
    # Alone, every model has its own stream, even over the same data: nothing is shared.
    for m in seq_members:
        assert m.stream is not None
        m.stream = setup.stream(m.stream.seed, m.stream.preprocess is not None)
    seq_fns = [alone_step(m, dev) for m in seq_members]
    pm = pack(build(), dev)
    t_seq: list[float] = []
    t_pack: list[float] = []
    for _ in range(repeats):  # interleaved, so load from other processes hits both alike
        t_seq.append(sum(per_step(f, steps, warmup, dev) for f in seq_fns))
        t_pack.append(per_step(pm.step, steps, warmup, dev))
    # The minimum over repeats is the least disturbed by other processes on a shared machine.
    ts, tp = min(t_seq), min(t_pack)
    est = estimate_pack(pm.members).total
    peak_pack = measure_step_peak(pm)
    peak_single = max(measure_step_peak(pack([m], dev)) for m in build())
    return {
        "T_seq_ms": ts * 1e3,
        "T_pack_ms": tp * 1e3,
        "IMPV": (ts - tp) / ts,
        "T_seq_median_ms": statistics.median(t_seq) * 1e3,
        "T_pack_median_ms": statistics.median(t_pack) * 1e3,
        "IMPV_median": (statistics.median(t_seq) - statistics.median(t_pack)) / statistics.median(t_seq),
        "mem_est_MiB": est / MiB,
        "mem_pack_MiB": peak_pack / MiB,
        "mem_single_max_MiB": peak_single / MiB,
        "layout": [len(u) for u in pm.layout],
    }


def swoh(arch: str, n: int, bs: int, setup: Setup) -> dict:
    """SwOH(n) (Eq. 2.4) of training n models sequentially for one epoch each."""
    dev = setup.device
    clock = CLOCK
    lrs = [10 ** -(2 + i % 3) for i in range(n)]
    # Checkpoints of the n models (what a sequential scheduler switches between).
    ckpts = []
    for i in range(n):
        m = make_member(f"m{i}", arch, "adam", lrs[i], bs, setup.stream(0, True), i, setup.side)
        ckpts.append({k: v.clone() for k, v in m.model.state_dict().items()})
    steps = -(-len(setup.y) // bs)

    def epoch(m: Member) -> None:
        f = alone_step(m, dev)
        for _ in range(steps):
            f()

    # warm up the process (first-ever step costs are not switching)
    epoch(make_member("w", arch, "adam", 1e-3, bs, setup.stream(0, True), 99, setup.side))
    _sync(dev)
    t = clock()
    for i in range(n):  # T_e(Seq): switch in, train one epoch, switch out
        torch.manual_seed(i)
        model = make_model(arch, side=setup.side)
        model.load_state_dict(ckpts[i])
        m = Member(f"m{i}", model, torch.optim.Adam(model.parameters(), lr=lrs[i]), bs, stream=setup.stream(0, True))
        epoch(m)
        c = free(m)
        c.state_dict()
    _sync(dev)
    t_seq = clock() - t
    t_models = []
    for i in range(n):  # T_e(Model i): resident model, the epoch alone
        model = make_model(arch, side=setup.side)
        model.load_state_dict(ckpts[i])
        m = Member(f"m{i}", model, torch.optim.Adam(model.parameters(), lr=lrs[i]), bs, stream=setup.stream(0, True))
        f = alone_step(m, dev)
        f()  # resident: its first step is not part of the epoch
        m.cursor.epoch, m.cursor.pos = 0, 0
        _sync(dev)
        t = clock()
        for _ in range(steps):
            f()
        _sync(dev)
        t_models.append(clock() - t)
    return {"model": arch, "n": n, "batch": bs, "T_e_seq_s": t_seq, "T_e_models_s": sum(t_models),
            "SwOH_s": t_seq - sum(t_models), "SwOH_frac": (t_seq - sum(t_models)) / t_seq}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer steps and configurations")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    ap.add_argument("--device", default="auto", help="cpu, cuda (cuda:N) or auto (cuda when torch sees one)")
    ap.add_argument("--side", type=int, default=16, help="image side (pixels)")
    ap.add_argument("--samples", type=int, default=2048)
    ap.add_argument("--clock", choices=("cpu", "wall"), default=None,
                    help="process CPU time or wall time (default: cpu on the CPU, wall on CUDA)")
    ap.add_argument("--json", default="bench/results/pack_step.json")
    ap.add_argument("--export-profile", metavar="JSON", help="only write the simulator profile from a results file")
    args = ap.parse_args()
    if args.export_profile:
        print(f"wrote {export_profile(json.loads(Path(args.export_profile).read_text()))}")
        return
    try:
        dev = torch_device(args.device)
    except ValueError as exc:
        ap.error(str(exc))
    if args.clock is None:  # CPU time does not count the GPU's work
        args.clock = "wall" if dev.type == "cuda" else "cpu"
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    torch.set_num_threads(args.threads)
    setup = Setup(args.samples, args.side, dev)
    steps, warmup, repeats = (10, 2, 3) if args.quick else (30, 3, 5)
    ns = (2, 4) if args.quick else (2, 4, 8)
    batches = (32, 128) if args.quick else (32, 64, 128)
    load0 = os.getloadavg()
    t0 = time.perf_counter()

    impv = []
    for arch, n, bs in itertools.product(("mlp3", "cnn"), ns, batches):
        specs = [{"arch": arch, "opt": "adam", "lr": 10 ** -(2 + i % 3), "bs": bs, "data": 0, "pre": True} for i in range(n)]
        r = measure(specs, setup, steps=steps, warmup=warmup, repeats=repeats)
        impv.append({"model": arch, "n": n, "batch": bs} | r)
        print(f"  impv {arch} n={n} bs={bs}: {r['IMPV']:+.1%}", flush=True)

    sw = [swoh(arch, n, 64, setup) for arch in ("mlp3", "cnn") for n in ((2,) if args.quick else (2, 4, 8))]

    ablation = []
    factors = ("model", "data", "preprocess", "optimizer", "batch")
    for combo in itertools.product((True, False), repeat=5):
        same = dict(zip(factors, combo))
        a = {"arch": "mlp3", "opt": "adam", "lr": 1e-3, "bs": 32, "data": 0, "pre": same["preprocess"]}
        b = {"arch": "mlp3" if same["model"] else "cnn", "opt": "adam" if same["optimizer"] else "momentum",
             "lr": 1e-2, "bs": 32 if same["batch"] else 50, "data": 0 if same["data"] else 1, "pre": same["preprocess"]}
        r = measure([a, b], setup, steps=steps, warmup=warmup, repeats=repeats)
        ablation.append({f: ("same" if v else "diff") if f != "preprocess" else ("yes" if v else "no")
                         for f, v in same.items()} | r)
    elapsed = time.perf_counter() - t0

    meta = {"torch": torch.__version__, "device": str(dev), "threads": args.threads, "clock": args.clock, "cpus": os.cpu_count(),
            "platform": platform.platform(), "side": args.side, "samples": args.samples, "quick": args.quick,
            "steps": steps, "warmup": warmup, "repeats": repeats, "loadavg_start": load0,
            "loadavg_end": os.getloadavg(), "elapsed_s": elapsed}
    out = {"meta": meta, "impv": impv, "swoh": sw, "ablation": ablation}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=2))
    report(out)


PROFILE_COLUMNS = ("model", "n", "batch", "T_seq_ms", "T_pack_ms", "IMPV", "mem_pack_MiB", "mem_single_max_MiB")


def export_profile(out: dict) -> Path:
    """Write the IMPV rows of ``out`` as ``src/cohabit/data/profiles/pack_step_<device>.csv``."""
    m = out["meta"]
    path = Path(__file__).resolve().parents[1] / "src/cohabit/data/profiles" / f"pack_step_{m['device']}.csv"
    lines = [f"# bench/pack_step.py: device={m['device']} threads={m['threads']} clock={m.get('clock', 'wall')} "
             f"steps={m['steps']} repeats={m['repeats']} torch={m['torch']} (fastest repeat; same data, "
             f"preprocessing in the step, Adam)", ",".join(PROFILE_COLUMNS)]
    for r in out["impv"]:
        lines.append(",".join(str(r[c]) if c in ("model", "n", "batch") else f"{r[c]:.6g}" for c in PROFILE_COLUMNS))
    path.write_text("\n".join(lines) + "\n")
    return path


def report(out: dict) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # pragma: no cover
        print(json.dumps(out, indent=2))
        return
    c = Console()
    m = out["meta"]
    c.print(f"[bold]pack_step[/] device={m['device']} threads={m['threads']} clock={m.get('clock', 'wall')} side={m['side']} "
            f"load avg {m['loadavg_start'][0]:.1f}->{m['loadavg_end'][0]:.1f} elapsed {m['elapsed_s']:.0f}s")
    t = Table(title="IMPV (Eq. 2.3) and peak memory: n models packed vs sequential, same data, preprocessing in step, Adam")
    for col in ("model", "n", "batch", "T_s(Seq) ms", "T_s(Pack) ms", "IMPV", "est MiB", "pack MiB", "1 model MiB"):
        t.add_column(col, justify="right")
    for r in out["impv"]:
        t.add_row(r["model"], str(r["n"]), str(r["batch"]), f"{r['T_seq_ms']:.2f}", f"{r['T_pack_ms']:.2f}",
                  f"{r['IMPV']:+.1%}", f"{r['mem_est_MiB']:.2f}", f"{r['mem_pack_MiB']:.2f}", f"{r['mem_single_max_MiB']:.2f}")
    c.print(t)
    t = Table(title="SwOH (Eq. 2.4): one epoch each, batch 64")
    for col in ("model", "n", "T_e(Seq) s", "sum T_e(Model) s", "SwOH s", "SwOH / T_e(Seq)"):
        t.add_column(col, justify="right")
    for r in out["swoh"]:
        t.add_row(r["model"], str(r["n"]), f"{r['T_e_seq_s']:.3f}", f"{r['T_e_models_s']:.3f}", f"{r['SwOH_s']:.3f}",
                  f"{r['SwOH_frac']:.1%}")
    c.print(t)
    t = Table(title="Table 2.2 ablation: two models packed (base: MLP-3, Adam, batch 32)")
    for col in ("model", "data", "preprocess", "optimizer", "batch", "T_s(Seq) ms", "T_s(Pack) ms", "IMPV"):
        t.add_column(col, justify="right")
    for r in out["ablation"]:
        t.add_row(r["model"], r["data"], r["preprocess"], r["optimizer"], r["batch"], f"{r['T_seq_ms']:.2f}",
                  f"{r['T_pack_ms']:.2f}", f"{r['IMPV']:+.1%}")
    c.print(t)


if __name__ == "__main__":
    main()

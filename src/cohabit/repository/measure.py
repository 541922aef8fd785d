"""Peak memory of real training by batch size: the observations TME learns from (Liu §3.3.1).

Rotary-DLT's TME fits "the batch size-memory curve" on the peak memory of finished jobs. This
module measures it on cohabit's own real torch workloads (``torch-mlp``, ``torch-cnn`` of
:mod:`cohabit.runtime.workloads`), for several model sizes x batch sizes, and turns the
measurements into repository records (:func:`memory_records`; the packaged ones are seeded by
:func:`cohabit.repository.seed.packaged_memory_records`).

What is measured (one fresh process per configuration, so that nothing a previous
configuration allocated is reused): the workload is built (data and model on the device,
momentum buffers allocated), then ``steps`` training steps run, and the peak is

* on the CPU: the peak resident set size during the steps minus the resident set size just
  before the first one (Linux: ``/proc/self/clear_refs`` resets ``VmHWM`` before the steps,
  ``/proc/self/status`` gives ``VmHWM`` after them). PyTorch has no CPU allocator statistics
  (``torch.cuda.max_memory_allocated``'s counterpart), so the resident set is the measure:
  it holds activations, gradients and autograd buffers, and the allocator's rounding;
* on CUDA: ``torch.cuda.max_memory_allocated()`` over the steps minus
  ``torch.cuda.memory_allocated()`` before them (``reset_peak_memory_stats`` first).

Both are the memory the training step needs beyond the job's resident data and weights, the
quantity that grows with the batch size. The packaged measurements
(``cohabit/data/memory/peak_mem_cpu.json``) were made with::

    python -m cohabit.repository.measure src/cohabit/data/memory/peak_mem_cpu.json

(its ``produced_by`` key names the machine, time and load average).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .store import JobRecord

__all__ = ["BATCH_SIZES", "MODELS", "measure", "measure_all", "memory_records", "probe"]

#: workload name -> the model sizes measured (workload parameters); the dataset is the workload's
#: generated data at its defaults (what a real job of that workload trains on).
MODELS: dict[str, tuple[dict[str, Any], ...]] = {
    "torch-mlp": tuple({"hidden": h} for h in (64, 128, 256, 512, 1024)),
    "torch-cnn": tuple({"channels": c} for c in (4, 8, 16, 32)),
}
BATCH_SIZES: tuple[int, ...] = (32, 64, 128, 256, 512, 1024)


def _status_kb(field: str) -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return float(line.split()[1])
    raise OSError(f"/proc/self/status has no {field}")


def probe(workload: dict[str, Any], batch_size: int, *, steps: int = 4, device: str = "cpu") -> dict[str, Any]:
    """Measure one configuration in this process (see the module doc); call it in a fresh process."""
    import torch

    from ..runtime.workloads import build, parse_config
    from ..runtime.workloads.base import WorkloadContext

    torch.set_num_threads(1)
    config = parse_config("probe", workload)
    ctx = WorkloadContext(job="probe", seed=config.seed, iterations=steps, batch_size=batch_size, device=device)
    w = build(config, ctx)
    params = sum(int(p.numel()) for p in w.model.parameters())  # type: ignore[attr-defined]
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        for _ in range(steps):
            w.step()
        torch.cuda.synchronize()
        peak_mb = (torch.cuda.max_memory_allocated() - before) / 2**20
    else:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")  # reset VmHWM to the current resident set
        before = _status_kb("VmRSS")
        for _ in range(steps):
            w.step()
        peak_mb = (_status_kb("VmHWM") - before) / 1024
    return {"workload": workload["name"], "params": {k: v for k, v in workload.items() if k != "name"},
            "num_parameters": params, "batch_size": batch_size, "device": device, "steps": steps,
            "peak_mem_mb": round(peak_mb, 3)}


def measure(workload: dict[str, Any], batch_size: int, *, steps: int = 4, device: str = "cpu",
            timeout: float = 300.0) -> dict[str, Any]:
    """:func:`probe` in a fresh Python process (its peak is this configuration's alone)."""
    arg = json.dumps({"workload": workload, "batch_size": batch_size, "steps": steps, "device": device})
    out = subprocess.run([sys.executable, "-m", "cohabit.repository.measure", "--probe", arg],
                         capture_output=True, text=True, timeout=timeout, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"memory probe of {workload} at batch size {batch_size} failed: {out.stderr.strip()[-500:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure_all(models: dict[str, Sequence[dict[str, Any]]] = MODELS, batch_sizes: Iterable[int] = BATCH_SIZES, *,
                steps: int = 4, device: str = "cpu") -> list[dict[str, Any]]:
    """Every model size x batch size, one fresh process each."""
    out = []
    for name, sizes in models.items():
        for params in sizes:
            for b in batch_sizes:
                out.append(measure({"name": name, **params}, b, steps=steps, device=device))
    return out


def _model_name(m: dict[str, Any]) -> str:
    return m["workload"] + "".join(f"-{k}{v}" for k, v in sorted(m["params"].items()))


def memory_records(measurements: Iterable[dict[str, Any]]) -> list[JobRecord]:
    """Measurements as repository records: dataset = the workload (what a real job's traits name,
    :func:`cohabit.policies.rotary.job_traits`), model = workload + its size parameters."""
    return [JobRecord(model=_model_name(m), dataset=str(m["workload"]), num_parameters=int(m["num_parameters"]),
                      batch_size=int(m["batch_size"]), peak_mem_mb=float(m["peak_mem_mb"]),
                      name=f"{_model_name(m)}@{m['batch_size']}", source="measured")
            for m in measurements]


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Measure peak training memory by batch size of cohabit's torch "
                                             "workloads and write them as JSON (see cohabit.repository.measure).")
    ap.add_argument("out", nargs="?", type=Path, help="JSON file to write")
    ap.add_argument("--device", default="cpu", help="cpu or cuda:0")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--probe", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.probe:
        req = json.loads(args.probe)
        print(json.dumps(probe(req["workload"], int(req["batch_size"]), steps=int(req["steps"]),
                               device=str(req["device"]))))
        return
    if args.out is None:
        ap.error("give the JSON file to write")
    t0 = time.time()
    rows = measure_all(steps=args.steps, device=args.device)
    doc = {
        "produced_by": {
            "command": f"python -m cohabit.repository.measure {args.out} --device {args.device} --steps {args.steps}",
            "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} CPUs, {platform.platform()}",
            "torch_threads": 1,
            "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "wall_s": round(time.time() - t0, 1),
            "measure": ("CPU: peak RSS during the steps minus RSS before them (clear_refs/VmHWM)"
                        if args.device == "cpu" else
                        "CUDA: torch.cuda.max_memory_allocated over the steps minus memory_allocated before"),
        },
        "measurements": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {len(rows)} measurements to {args.out}")


if __name__ == "__main__":
    main()

"""``cohabit hyperband``: (pack-aware) Hyperband from the command line (Liu, ch. 2, Alg. 1 and 2)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

app = typer.Typer(help="Pack: train several models jointly; pack-aware Hyperband.", no_args_is_help=True)


@app.command()
def hyperband(
    pack: str = typer.Option("knn", help="pack_opt: none (Alg. 1), knn, knn-time, random or batch-size (Alg. 2)."),
    model: str = typer.Option("mlp3", help="mlp3 or cnn."),
    r: int = typer.Option(81, "--R", "-R", help="Maximum resource per configuration (units)."),
    eta: int = typer.Option(3, help="Hyperband's reduction factor."),
    samples: int = typer.Option(2560, help="Generated digit-like samples (80% train, 20% validation)."),
    unit: int = typer.Option(128, help="Training samples per resource unit."),
    memory_mb: float = typer.Option(4.0, help="Device memory budget a pack must fit (MiB)."),
    max_pack: int = typer.Option(0, help="At most this many models per pack (0: memory decides)."),
    threshold: float = typer.Option(6.0, help="kNN similarity threshold (index distance)."),
    refill: bool = typer.Option(False, help="Load the next configuration into a running pack when a member finishes."),
    aware: bool = typer.Option(False, help="Cap packs at the size the measured step profile (bench/pack_step.py, "
                                           "packaged) says gains most on this machine."),
    interleave: bool = typer.Option(False, help="Train rung i of every bracket in one wave (bigger pools to pack)."),
    schedule: str = typer.Option("alg2", help="alg2 (packs per rung, Alg. 2) or async (one pack refilled as members finish)."),
    seed: int = typer.Option(0, help="Seed for data, sampling and packing."),
    threads: int = typer.Option(1, help="torch intra-op threads."),
    device: str = typer.Option("cpu", help="Where trials train: cpu, cuda, cuda:N or auto (cuda when torch sees one)."),
    json_out: Path | None = typer.Option(None, "--json", help="Write the result as JSON here."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log every rung."),
) -> None:
    """Tune Table 2.3's search space on generated digits with (pack-aware) Hyperband."""
    import torch
    from rich.console import Console
    from rich.table import Table

    from .hyperband import PACKERS, Workload, make_chooser, make_packer
    from .hyperband import hyperband as run
    from .models import make_digits, split

    if pack not in PACKERS:
        raise typer.BadParameter(f"--pack must be one of {', '.join(PACKERS)}, got {pack!r}")
    if model not in ("mlp3", "cnn"):
        raise typer.BadParameter(f"--model must be mlp3 or cnn, got {model!r}")
    if schedule not in ("alg2", "async"):
        raise typer.BadParameter(f"--schedule must be alg2 or async, got {schedule!r}")
    if schedule == "async" and pack not in ("knn", "random", "batch-size"):
        raise typer.BadParameter(f"--schedule async needs --pack knn, random or batch-size, got {pack!r}")
    if memory_mb <= 0:
        raise typer.BadParameter(f"--memory-mb must be positive, got {memory_mb}")
    from ..runtime.devices import torch_device

    try:
        dev = torch_device(device)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    torch.set_num_threads(threads)
    console = Console()
    x, y = make_digits(samples, seed=seed)
    xt, yt, xv, yv = split(x, y, 0.2, seed=seed)
    w = Workload(model, xt, yt, xv, yv, unit_samples=unit, seed=seed, device=dev)
    limit = int(memory_mb * 2**20)
    profile = None
    if aware:
        from .profile import packaged_profile

        profile = packaged_profile()
    packer = make_packer(pack, w, memory_limit=limit, threshold=threshold, max_size=max_pack or None, seed=seed,
                         profile=profile)
    chooser = make_chooser(pack, threshold=threshold, seed=seed) if schedule == "async" else None
    res = run(w, r, eta, packer=packer, seed=seed, memory_limit=limit, refill=refill, chooser=chooser,
              interleave=interleave, log=console.print if verbose else None)
    s = res.summary() | {"pack": pack, "schedule": schedule, "model": model, "R": r, "eta": eta, "aware": aware,
                         "device": str(dev)}
    t = Table(title=f"Hyperband R={r} eta={eta} pack={pack} model={model}")
    t.add_column("metric")
    t.add_column("value", justify="right")
    for k, v in s.items():
        t.add_row(k, f"{v:.4g}" if isinstance(v, float) else str(v))
    console.print(t)
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(s, indent=2))

"""IMPV (Liu, Eq. 2.3) of packs of Table 2.3 configurations: which hyper-parameter differences cost.

pack-aware Hyperband packs configurations sampled from Table 2.3, which differ
in batch size, optimizer, learning rate and activation at once. This measures,
for n = 4 and 8 MLP-3 members on the shared digit stream, the process CPU time
of one packed step against the n members' steps alone (the baseline loop of
Alg. 1), when the members differ in one factor only or in everything (random
samples). Learning rates differ in every case (they cost nothing to pack).

Usage: python bench/pack_mix.py [--steps 40] [--repeats 3] [--json bench/results/pack_mix.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from cohabit.pack import PackedModel  # noqa: E402
from cohabit.pack.hyperband import Workload, train_alone  # noqa: E402
from cohabit.pack.models import make_digits, split  # noqa: E402
from cohabit.pack.pack_opt import TABLE_2_3, Config  # noqa: E402

KINDS = ("same", "optimizer", "activation", "batch", "all")


def configs(kind: str, n: int, seed: int) -> list[Config]:
    """n configurations differing in ``kind`` (and in learning rate) around bs=40, Adam, ReLU."""
    lr = [i % len(TABLE_2_3.learning_rates) for i in range(n)]
    if kind == "same":
        return [TABLE_2_3.config(4, 0, lr[i], 3) for i in range(n)]
    if kind == "optimizer":
        return [TABLE_2_3.config(4, i % 4, lr[i], 3) for i in range(n)]
    if kind == "activation":
        return [TABLE_2_3.config(4, 0, lr[i], i % 4) for i in range(n)]
    if kind == "batch":
        return [TABLE_2_3.config(min(2 * i, 10), 0, lr[i], 3) for i in range(n)]
    return TABLE_2_3.sample(n, random.Random(seed))


def measure(w: Workload, cs: list[Config], steps: int, repeats: int) -> tuple[float, float]:
    """(seconds per step of the members alone, summed; seconds per packed step), fastest repeat."""
    seq, pack = [], []
    for r in range(repeats):
        alone = [w.member(c, f"a{r}.{i}") for i, c in enumerate(cs)]
        for m in alone:
            train_alone(m, 3)  # warm-up
        t = time.process_time()
        for m in alone:
            train_alone(m, steps)
        seq.append((time.process_time() - t) / steps)
        pm = PackedModel([w.member(c, f"p{r}.{i}") for i, c in enumerate(cs)])
        for _ in range(3):
            pm.step()
        t = time.process_time()
        for _ in range(steps):
            pm.step()
        pack.append((time.process_time() - t) / steps)
    return min(seq), min(pack)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--json", default="bench/results/pack_mix.json")
    args = ap.parse_args()
    torch.set_num_threads(1)
    x, y = make_digits(2560, seed=0)
    xt, yt, xv, yv = split(x, y, 0.2, seed=0)
    w = Workload("mlp3", xt, yt, xv, yv, unit_samples=512, seed=0, model_kwargs={"hidden": args.hidden})
    load0 = os.getloadavg()
    rows = []
    for kind in KINDS:
        for n in (4, 8):
            seq, pack = measure(w, configs(kind, n, seed=n), args.steps, args.repeats)
            rows.append({"differ": kind, "n": n, "T_seq_ms": seq * 1e3, "T_pack_ms": pack * 1e3,
                         "IMPV": (seq - pack) / seq})
            print(f"  {kind:10s} n={n}: seq {seq * 1e3:6.2f} ms  pack {pack * 1e3:6.2f} ms  "
                  f"IMPV {(seq - pack) / seq:+.2f}", flush=True)
    out = {"meta": {"torch": torch.__version__, "threads": 1, "clock": "cpu", "hidden": args.hidden,
                    "steps": args.steps, "repeats": args.repeats, "loadavg_start": load0,
                    "loadavg_end": os.getloadavg()}, "rows": rows}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=2))
    from rich.console import Console
    from rich.table import Table

    t = Table(title="IMPV of MLP-3 packs whose members differ in one factor of Table 2.3, or in all (CPU time)")
    for col in ("members differ in", "n", "T_s(Seq) ms", "T_s(Pack) ms", "IMPV"):
        t.add_column(col, justify="right")
    for r in rows:
        t.add_row(r["differ"], str(r["n"]), f"{r['T_seq_ms']:.2f}", f"{r['T_pack_ms']:.2f}", f"{r['IMPV']:+.2f}")
    Console(width=120).print(t)


if __name__ == "__main__":
    main()

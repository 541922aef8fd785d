"""Robustness campaign (issue 12): bad input, replayed and fuzzed, against the ``cohabit`` command line.

Two parts, each case classified as one of ``success`` (exit 0), ``clean_error``
(non-zero exit, no Python traceback), ``traceback``, ``hang`` (over the time
limit) or ``crash`` (killed by a signal: segfault, out of memory):

* **replay** — the classes of the issue, one command each, in a fresh process:
  deep YAML, alias bombs, huge counts, infinite times, bad options,
  unwritable outputs, a Ray address nobody answers.
* **fuzz** — ``--cases`` generated cases (seeded, reproducible): random
  windows of the embedded traces of every format (and a YAML ``cohabit``
  trace built from them) with field, row and byte mutations, strict and
  ``--skip-bad-rows``; mutated cluster files; random command-line options.
  Cases run in worker processes (``--jobs``) through typer's in-process
  runner with a per-case CPU-time alarm (20 s; a busy machine makes no false
  hangs); a worker that dies is restarted after the case that killed it
  (counted as ``crash``), one silent for 10 minutes is killed (``hang``).

``--code DIR`` runs another checkout's package (``DIR/src``), e.g. the code
before the fix; ``--label`` names the run in ``bench/results/robustness.json``
(runs under other labels are kept). Prints a table of counts.

    python bench/robustness.py --label after --cases 10000
    python bench/robustness.py --label before --code /work/main --cases 10000
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from importlib import resources as ilr
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "robustness.json"
OUTCOMES = ("success", "clean_error", "traceback", "hang", "crash")
CASE_TIMEOUT_S = 20.0  # CPU seconds per fuzz case
WORKER_SILENT_S = 600.0  # wall seconds without a finished case before a worker counts as stuck in C code
NASTY = ["", "-1", "0", "1e308", "inf", "-inf", "nan", "1e8", "100000000", "99999999999999999999999", "abc",
         "[/x]", "x" * 5000, "1_0", "\x00", "é", "0.0000001", "1e-300", "9223372036854775808", "\"", "'", ",,"]
YAML_NASTY = [".inf", "-.inf", ".nan", "1e400", "100000000", "123456789012345678901", "-5", "null", "[1, 2]",
              "{a: 1}", "'[/x]'", "x" * 3000, "&a [*a]", "!!python/object:os.system", "[" * 200 + "]" * 200, "~"]
FORMATS = {  # format -> embedded file
    "tiresias": "tiresias_480.csv", "philly": "philly_82k.csv", "pollux": "pollux_workload-1.csv",
    "alibaba": "alibaba_openb_pods_default.csv", "harmony": "harmony_80.csv",
}


# ---------------------------------------------------------------------------------------------- classify
def classify(rc: int | None, text: str, *, timed_out: bool = False) -> str:
    """One outcome from an exit status (None: no exit) and the command's output."""
    if timed_out:
        return "hang"
    if rc is not None and (rc < 0 or rc >= 128):
        return "crash"
    if "Traceback (most recent call last)" in text:
        return "traceback"
    return "success" if rc == 0 else "clean_error"


# ------------------------------------------------------------------------------------------------ replay
def _replay_cases(d: Path) -> list[tuple[str, list[str], float]]:
    """(name, cohabit arguments, time limit) for each class of bad input in the issue."""
    def w(name: str, text: str | bytes) -> str:
        p = d / name
        p.write_bytes(text if isinstance(text, bytes) else text.encode())
        return str(p)

    header = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
    bomb = "jobs:\n  - id: a\n    gpus: 1\n    workload:\n      l0: &l0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"      l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]\n" for i in range(1, 9))
    real = "jobs:\n  - {id: a, workers: {count: 1, demand: {cpu: 1}}, iterations: 50, workload: {name: mlr}}\n"
    realf = w("real.yaml", real)
    sim = ["simulate", "--trace", "tiresias_480", "--limit", "20", "--policy", "fifo"]
    cases: list[tuple[str, list[str], float]] = [
        ("deep yaml trace (40,000 levels)", ["simulate", "--format", "cohabit", "--trace",
                                             w("deep.yaml", "jobs:\n  - " + "[" * 40000 + "]" * 40000 + "\n")], 60),
        ("deep yaml cluster", [*sim, "--cluster", w("deepc.yaml", "name: c\nnodes: " + "[" * 40000 + "]" * 40000)], 60),
        ("alias bomb in a workload (run)", ["run", w("bomb.yaml", bomb), "--policy", "fifo"], 60),
        ("recursive alias", ["simulate", "--format", "cohabit", "--trace",
                             w("rec.yaml", "jobs:\n  - id: a\n    gpus: 1\n    truth: {duration: 5}\n"
                                           "    workload: &r {x: *r}\n")], 60),
        ("gpus: 1e8 (yaml trace)", ["simulate", "--format", "cohabit", "--trace",
                                     w("g8.yaml", "jobs:\n  - {id: a, gpus: 100000000, truth: {duration: 5}}\n")], 60),
        ("gpus: .inf", ["simulate", "--format", "cohabit", "--trace",
                        w("ginf.yaml", "jobs:\n  - {id: a, gpus: .inf, truth: {duration: 5}}\n")], 60),
        ("workers.count 2^63", ["simulate", "--format", "cohabit", "--trace", w("w63.yaml", (
            "jobs:\n  - {id: a, architecture: allreduce, workers: {count: 9223372036854775808, demand: {gpu: 1}}, "
            "truth: {duration: 5}}\n"))], 60),
        ("num_gpu 1e8 (csv)", ["simulate", "--format", "tiresias", "--trace",
                               w("g8.csv", header + "j1,100000000,0,10,m,10,1\n")], 60),
        ("iterations of 20 digits (csv)", ["simulate", "--format", "tiresias", "--trace",
                                           w("it.csv", header + "j1,1,0,12345678901234567890,m,10,1\n")], 60),
        ("node gpu: 1e8", [*sim, "--cluster", w("c8.yaml", "name: c\nnodes:\n  - {name: n, capacity: "
                                                           "{gpu: 100000000, cpu: 8}}\n")], 60),
        ("submit_time: .inf (yaml trace)", ["simulate", "--format", "cohabit", "--trace", w("tinf.yaml", (
            "jobs:\n  - {id: a, gpus: 1, truth: {duration: 5}}\n  - {id: b, gpus: 1, submit_time: .inf, "
            "truth: {duration: 5}}\n"))], 60),
        ("5,000-character job id", ["simulate", "--format", "tiresias", "--trace",
                                    w("long.csv", header + "x" * 5000 + ",1,0,10,m,10,1\n")], 60),
        ("non-UTF-8 byte", ["simulate", "--format", "tiresias", "--trace",
                            w("u8.csv", header.encode() + b"j1,1,0,10,m,10,1\n" * 3000 + b"j\xff,1,0,10,m,10,1\n")], 60),
        ("5 MB of garbage with --skip-bad-rows", ["simulate", "--format", "tiresias", "--skip-bad-rows", "--trace",
                                                 w("garbage.csv", header + "x,y\n" * 1_250_000)], 120),
        ("--seed -1", [*sim, "--seed", "-1"], 60),
        ("--seed 2^32", [*sim, "--seed", "4294967296"], 60),
        ("--horizon -5", [*sim, "--horizon", "-5"], 60),
        ("--horizon nan", [*sim, "--horizon", "nan"], 60),
        ("--json unwritable", [*sim, "--json", "/proc/none/r.json"], 60),
        ("--json is a directory", [*sim, "--json", str(d)], 60),
        ("--plot invalid", [*sim, "--plot", str(d / "plot.txt")], 60),
        ("gandiva:slice_length=1e-9", ["simulate", "--trace", "tiresias_480", "--limit", "20", "--policy",
                                       "gandiva:slice_length=1e-9"], 60),
        ("run --max-restarts -1", ["run", realf, "--policy", "fifo", "--max-restarts", "-1"], 60),
        ("run --checkpoint-interval -1", ["run", realf, "--policy", "fifo", "--checkpoint-interval", "-1"], 60),
        ("run --checkpoint-interval nan", ["run", realf, "--policy", "fifo", "--checkpoint-interval", "nan"], 60),
        ("run --bandwidth-mbps nan", ["run", realf, "--policy", "fifo", "--bandwidth-mbps", "nan"], 60),
        ("run --workdir is a file", ["run", realf, "--policy", "fifo", "--workdir", realf], 60),
        ("run submit_time: 1e12", ["run", w("late.yaml", real.replace("iterations: 50", "iterations: 50, "
                                                                        "submit_time: 1e12")), "--policy", "fifo"], 60),
        ("run --ray-address 127.0.0.1:1", ["run", realf, "--policy", "fifo", "--backend", "ray", "--ray-address",
                                           "127.0.0.1:1"], 45),
    ]
    return cases


def run_replay(code: Path | None) -> dict[str, Any]:
    env = {**os.environ, "COLUMNS": "200", "RAY_USAGE_STATS_ENABLED": "0"}
    if code is not None:
        env["PYTHONPATH"] = str(code / "src")
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="cohabit-robust-") as tmp:
        for name, args, limit in _replay_cases(Path(tmp)):
            t0 = time.perf_counter()
            proc = subprocess.Popen([sys.executable, "-m", "cohabit.cli", *args], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env=env, cwd=tmp, start_new_session=True)
            try:
                so, se = proc.communicate(timeout=limit)
                outcome = classify(proc.returncode, (so + se).decode(errors="replace"))
                rc: int | None = proc.returncode
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                so, se = proc.communicate()
                outcome, rc = "hang", None
            text = (so + se).decode(errors="replace").strip()
            out[name] = {"outcome": outcome, "rc": rc, "seconds": round(time.perf_counter() - t0, 2),
                         "output_bytes": len(so) + len(se), "tail": text[-300:]}
            print(f"  {outcome:12} {out[name]['seconds']:7.1f}s  {name}", flush=True)
    return out


# -------------------------------------------------------------------------------------------------- fuzz
def _embedded_lines(fmt: str) -> list[str]:
    return ilr.files("cohabit.data").joinpath("traces", FORMATS[fmt]).read_text().splitlines()


def _window(rng: random.Random, lines: list[str]) -> list[str]:
    n = rng.randint(1, 40)
    start = rng.randint(1, max(1, len(lines) - n))
    return [lines[0], *lines[start:start + n]]


def _yaml_trace(rows: list[str]) -> str:
    """A cohabit-format YAML trace from tiresias rows."""
    out = ["cluster: tiresias", "jobs:"]
    for r in rows[1:]:
        f = r.split(",")
        out.append(f"  - {{id: {f[0]}, gpus: {f[1]}, submit_time: {f[2]}, iterations: {f[3]}, model: {f[4]}, "
                   f"truth: {{iterations: {f[3]}, duration: {f[5]}}}}}")
    return "\n".join(out) + "\n"


def _mutate_csv(rng: random.Random, rows: list[str]) -> tuple[str, str]:
    kind = rng.choice(["field", "field", "field", "row", "byte"])
    rows = list(rows)
    if kind == "field" and len(rows) > 1:
        i = rng.randrange(1, len(rows))
        f = rows[i].split(",")
        f[rng.randrange(len(f))] = rng.choice(NASTY)
        rows[i] = ",".join(f)
    elif kind == "row" and len(rows) > 1:
        i = rng.randrange(1, len(rows))
        op = rng.choice(["dup", "del", "cut", "extra", "swap", "blank_header"])
        if op == "dup":
            rows.insert(i, rows[i])
        elif op == "del":
            del rows[i]
        elif op == "cut":
            rows[i] = rows[i][: rng.randrange(len(rows[i]) + 1)]
        elif op == "extra":
            rows[i] += ",x"
        elif op == "swap":
            f = rows[i].split(",")
            rng.shuffle(f)
            rows[i] = ",".join(f)
        else:
            rows[0] = rows[0].replace(rng.choice(rows[0].split(",")), "zz", 1)
    text = "\n".join(rows) + "\n"
    if kind == "byte":
        return _mutate_bytes(rng, text), kind
    return text, kind


def _mutate_bytes(rng: random.Random, text: str) -> str:
    b = bytearray(text.encode())
    for _ in range(rng.randint(1, 5)):
        op = rng.choice(["flip", "insert", "truncate", "nul"])
        if not b:
            break
        i = rng.randrange(len(b))
        if op == "flip":
            b[i] ^= 1 << rng.randrange(8)
        elif op == "insert":
            b[i:i] = bytes([rng.choice([0xFF, 0xC3, 0x80, 0x0D, 0x22, 0x2C, 0x0A])])
        elif op == "truncate":
            del b[i:]
        else:
            b[i] = 0
    return b.decode("latin-1")  # written back as latin-1 bytes: any byte value survives


def _mutate_yaml(rng: random.Random, text: str) -> tuple[str, str]:
    kind = rng.choice(["value", "value", "byte", "indent"])
    if kind == "value":
        import re

        nums = list(re.finditer(r"(?<=: )[^,{}\n]+", text))
        if nums:
            m = rng.choice(nums)
            text = text[:m.start()] + rng.choice(YAML_NASTY) + text[m.end():]
        return text, kind
    if kind == "indent":
        lines = text.splitlines()
        i = rng.randrange(len(lines))
        lines[i] = " " * rng.randint(0, 5) + lines[i].lstrip()
        return "\n".join(lines) + "\n", kind
    return _mutate_bytes(rng, text), kind


def make_case(seed: int, index: int, tmp: Path) -> tuple[list[str], str]:
    """(cohabit arguments, description) of fuzz case ``index``; writes its files under ``tmp``."""
    rng = random.Random(seed * 1_000_003 + index)
    family = rng.choices(["trace", "yaml", "cluster", "options"], weights=[60, 20, 10, 10])[0]
    base = ["simulate", "--policy", rng.choice(["fifo", "srtf", "tiresias"])]
    if rng.random() < 0.5:
        base.append("--skip-bad-rows")
    f = tmp / f"case{index}"
    if family == "trace":
        fmt = rng.choice(list(FORMATS))
        text, kind = _mutate_csv(rng, _window(rng, _embedded_lines(fmt)))
        f.write_bytes(text.encode("latin-1", errors="replace") if kind == "byte" else text.encode())
        return [*base, "--trace", str(f), "--format", fmt], f"{fmt}/{kind}"
    if family == "yaml":
        text, kind = _mutate_yaml(rng, _yaml_trace(_window(rng, _embedded_lines("tiresias"))))
        f.write_bytes(text.encode("latin-1", errors="replace") if kind == "byte" else text.encode())
        return [*base, "--trace", str(f), "--format", "cohabit"], f"cohabit/{kind}"
    if family == "cluster":
        n = rng.randint(1, 4)
        text = "name: fz\nnodes:\n" + "".join(
            f"  - {{name: n{i}, capacity: {{gpu: {rng.choice([1, 4, 8])}, cpu: 32, mem_gb: 256}}}}\n"
            for i in range(n))
        text, kind = _mutate_yaml(rng, text)
        f = f.with_suffix(".yaml")
        f.write_bytes(text.encode("latin-1", errors="replace") if kind == "byte" else text.encode())
        return [*base, "--trace", "tiresias_480", "--limit", "20", "--cluster", str(f)], f"cluster/{kind}"
    opts = {"--seed": ["-1", "0", "4294967296", "abc", "1e3"], "--horizon": ["-5", "nan", "inf", "0", "1e-300", "10"],
            "--limit": ["-1", "0", "5", "abc", "99999999999999999999"],
            "--json": [str(tmp), "/proc/none/x.json", str(tmp / "ok.json")],
            "--plot": [str(tmp / "x.txt"), "/proc/none/x.png"],
            "--policy": ["nope", "srtf:preempt_margin=nan", "gandiva:slice_length=1e-9", "srtf:x=1", "fifo:", ":"],
            "--format": ["nope", "philly", ""], "--cluster": ["nope", str(tmp), "philly"]}
    args = ["simulate", "--trace", "tiresias_480", "--limit", "20"]
    for k in rng.sample(list(opts), rng.randint(1, 3)):
        args += [k, rng.choice(opts[k])]
    return args, "options"


class _Hang(BaseException):
    """Raised by the per-case CPU-time alarm (a BaseException, so the CLI runner does not swallow it)."""


def worker(seed: int, start: int, stop: int) -> None:
    """Run fuzz cases [start, stop) in this process; one JSON line per case on stdout."""
    import resource
    import signal

    from typer.testing import CliRunner

    from cohabit.cli import app

    resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))  # a runaway allocation fails, not the machine

    def alarm(*_: Any) -> None:
        raise _Hang

    signal.signal(signal.SIGVTALRM, alarm)  # CPU time, not wall time: a loaded machine makes no false hangs
    runner = CliRunner()
    with tempfile.TemporaryDirectory(prefix="cohabit-fuzz-") as tmp:
        for i in range(start, stop):
            args, desc = make_case(seed, i, Path(tmp))
            signal.setitimer(signal.ITIMER_VIRTUAL, CASE_TIMEOUT_S)
            try:
                res = runner.invoke(app, args)
                signal.setitimer(signal.ITIMER_VIRTUAL, 0)
                tb = res.exception is not None and not isinstance(res.exception, SystemExit)
                outcome = "traceback" if tb else ("success" if res.exit_code == 0 else "clean_error")
                detail = repr(res.exception)[:200] if tb else res.output[-160:]
            except _Hang:
                outcome, detail = "hang", ""
            finally:
                signal.setitimer(signal.ITIMER_VIRTUAL, 0)
            print(json.dumps({"i": i, "desc": desc, "outcome": outcome, "detail": detail}), flush=True)


def run_fuzz(code: Path | None, seed: int, cases: int, jobs: int = 1) -> dict[str, Any]:
    """The campaign over ``jobs`` worker processes (disjoint index ranges), merged."""
    if jobs <= 1:
        return _run_range(code, seed, 0, cases)
    from concurrent.futures import ThreadPoolExecutor

    t0 = time.perf_counter()
    cuts = [cases * k // jobs for k in range(jobs + 1)]
    with ThreadPoolExecutor(jobs) as ex:
        parts = list(ex.map(lambda k: _run_range(code, seed, cuts[k], cuts[k + 1]), range(jobs)))
    counts = {o: sum(p["counts"][o] for p in parts) for o in OUTCOMES}
    by_kind: dict[str, dict[str, int]] = {}
    examples: dict[str, list[dict[str, Any]]] = {}
    for p in parts:
        for kind, c in p["by_kind"].items():
            agg = by_kind.setdefault(kind, dict.fromkeys(OUTCOMES, 0))
            for o in OUTCOMES:
                agg[o] += c[o]
        for o, ex_list in p["examples"].items():
            examples.setdefault(o, []).extend(ex_list[: 10 - len(examples.get(o, []))])
    tb_types: dict[str, int] = {}
    for p in parts:
        for name, n in p.get("traceback_types", {}).items():
            tb_types[name] = tb_types.get(name, 0) + n
    return {"cases": cases, "seed": seed, "seconds": round(time.perf_counter() - t0, 1), "counts": counts,
            "by_kind": by_kind, "examples": examples, "workers": jobs, "traceback_types": tb_types}


def _run_range(code: Path | None, seed: int, start: int, stop: int) -> dict[str, Any]:
    env = {**os.environ, "COLUMNS": "200"}
    if code is not None:
        env["PYTHONPATH"] = str(code / "src")
    counts = dict.fromkeys(OUTCOMES, 0)
    by_kind: dict[str, dict[str, int]] = {}
    examples: dict[str, list[dict[str, Any]]] = {}
    i = start
    cases = stop
    tb_types: dict[str, int] = {}
    t0 = time.perf_counter()

    def note(rec: dict[str, Any]) -> None:
        counts[rec["outcome"]] += 1
        if rec["outcome"] == "traceback":  # by exception type, e.g. MarkupError
            name = rec["detail"].split("(", 1)[0] or "?"
            tb_types[name] = tb_types.get(name, 0) + 1
        by_kind.setdefault(rec["desc"], dict.fromkeys(OUTCOMES, 0))[rec["outcome"]] += 1
        if rec["outcome"] not in ("success", "clean_error"):
            print(f"  {rec['outcome']}: case {rec['i']} {rec['desc']}: {rec['detail'][:200]!r}", flush=True)
            if len(examples.setdefault(rec["outcome"], [])) < 10:
                examples[rec["outcome"]].append(rec)

    while i < cases:
        proc = subprocess.Popen([sys.executable, __file__, "--worker", str(seed), str(i), str(cases)],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
        assert proc.stdout is not None
        import selectors

        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        while True:
            if not sel.select(timeout=WORKER_SILENT_S):  # the alarm could not fire: stuck in C code
                proc.kill()
                note({"i": i, "desc": "?", "outcome": "hang", "detail": "worker silent"})
                i += 1
                break
            line = proc.stdout.readline()
            if not line:
                proc.wait()
                if i < cases:  # died on case i
                    note({"i": i, "desc": "?", "outcome": "crash", "detail": f"worker exit {proc.returncode}"})
                    i += 1
                break
            rec = json.loads(line)
            note(rec)
            i = rec["i"] + 1
            if (i - start) % 500 == 0:
                print(f"  [{start}..{stop}) at {i}, {time.perf_counter() - t0:.0f} s: {counts}", flush=True)
        sel.close()
        proc.stdout.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return {"cases": stop - start, "seed": seed, "seconds": round(time.perf_counter() - t0, 1), "counts": counts,
            "by_kind": by_kind, "examples": examples, "traceback_types": tb_types}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", default="after")
    ap.add_argument("--code", type=Path, default=None, help="a checkout whose src/ to test (default: this one)")
    ap.add_argument("--cases", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (disjoint ranges of cases)")
    ap.add_argument("--no-replay", action="store_true")
    ap.add_argument("--out", type=Path, default=RESULTS)
    a = ap.parse_args()
    result: dict[str, Any] = {"code": str(a.code or ROOT)}
    if not a.no_replay:
        print(f"[{a.label}] replaying the classes of issue 12", flush=True)
        replay = run_replay(a.code)
        result["replay"] = replay
        result["replay_counts"] = {o: sum(r["outcome"] == o for r in replay.values()) for o in OUTCOMES}
    print(f"[{a.label}] fuzz campaign: {a.cases} cases, seed {a.seed}", flush=True)
    result["fuzz"] = run_fuzz(a.code, a.seed, a.cases, a.jobs)
    print(f"\n{'':14}" + "".join(f"{o:>13}" for o in OUTCOMES))
    for part in ("replay_counts",):
        if part in result:
            print(f"{'replay':14}" + "".join(f"{result[part][o]:>13}" for o in OUTCOMES))
    print(f"{'fuzz':14}" + "".join(f"{result['fuzz']['counts'][o]:>13}" for o in OUTCOMES))
    data = json.loads(a.out.read_text()) if a.out.exists() else {}
    data[a.label] = result
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(data, indent=1, default=str))
    print(f"wrote {a.out} [{a.label}]")


if __name__ == "__main__":
    main()

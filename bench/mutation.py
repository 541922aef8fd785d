"""Mutation testing of the policy modules with mutmut, on a seeded sample of mutants.

mutmut (a dev tool, not a project dependency: ``pip install mutmut`` into your venv) generates
every mutant of the modules below; running all of them (about 4,400, the MILP ones at ~8 s each
under load)
does not fit a shared 2-core machine, so each run checks the same seeded sample: at most
``--per-file`` mutants per module, drawn with :class:`random.Random` seeded by the file name
from the sorted mutant names. The mutants depend only on the source, so a run at another git
ref with the same policy code checks the very same mutants, and before/after compare like with
like.

Each run works on a copy of the tree at ``--ref`` (``git archive``) under ``--workdir``, with a
``setup.cfg`` naming the modules and the test files (mutmut runs, per mutant, only the tests of
that selection that cover the mutated function)::

    python bench/mutation.py run --ref b96158b --label before
    python bench/mutation.py run --ref HEAD --label after
    python bench/mutation.py summary --label before --label after     # -> bench/results/mutation.json

``summary`` reads mutmut's per-file ``.meta`` results and writes, per label, per module and in
total: sampled, killed, timeout, survived, no tests, other, and the surviving share
(survived / sampled), with the names of the surviving mutants. ``mutmut show NAME`` in the
work copy prints a mutant's diff.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from collections import Counter
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "mutation.json"

MODULES = [
    "src/cohabit/policies/tiresias.py",
    "src/cohabit/policies/dorm/milp.py",
    "src/cohabit/policies/harmony/algorithm.py",
    "src/cohabit/policies/harmony/regroup.py",
    "src/cohabit/policies/harmony/policy.py",
    "src/cohabit/policies/fifo.py",
    "src/cohabit/policies/srtf.py",
]
TESTS = [
    "tests/test_policy_tiresias.py",
    "tests/test_policy_dorm_milp.py",
    "tests/test_harmony_algorithm.py",
    "tests/test_harmony_policy.py",
    "tests/test_harmony_order.py",
    "tests/test_engine_hand_cases.py",
    "tests/test_policy_fifo.py",  # these two are new with the "after" run; a run uses those present at its ref
    "tests/test_policy_srtf.py",
]  # not tests/test_baselines_sanity.py: it covers every policy and costs 10-20 s per mutant
#: mutmut's exit-code classes (mutmut/stats.py): 1 and 3 kill; SIGXCPU codes are its timeouts
KILLED, SURVIVED, NO_TESTS = {1, 3}, {0}, {5, 33}
TIMEOUT = {36, -24, 24, 152, 255}


def present_tests(work: Path) -> list[str]:
    """The test files of :data:`TESTS` that exist in the work copy."""
    return [t for t in TESTS if (work / t).exists()]


def setup_cfg(work: Path) -> str:
    lines = ["[mutmut]", "source_paths=src/", "only_mutate="]
    lines += [f"    {m}" for m in MODULES]
    lines += ["pytest_add_cli_args_test_selection="] + [f"    {t}" for t in present_tests(work)]
    lines += ["also_copy=", "    bench", "    examples", ""]
    return "\n".join(lines)


def mutmut() -> str:
    exe = Path(sys.executable).with_name("mutmut")
    if not exe.exists():
        sys.exit("error: mutmut is not installed in this environment (pip install mutmut)")
    return str(exe)


def metas(work: Path) -> list[Path]:
    return sorted(work.glob("mutants/src/**/*.py.meta"))


def sample(work: Path, per_file: int) -> dict[str, list[str]]:
    """Module -> the sampled mutant names (seeded by the meta file's name)."""
    out = {}
    for meta in metas(work):
        names = sorted(json.loads(meta.read_text())["exit_code_by_key"])
        pick = names if len(names) <= per_file else random.Random(f"{meta.name}:0").sample(names, per_file)
        out[str(meta.relative_to(work / "mutants"))[: -len(".meta")]] = sorted(pick)
    return out


def run(ref: str, label: str, workdir: Path, per_file: int, children: int) -> None:
    work = workdir / label
    if work.exists():
        subprocess.run(["rm", "-rf", str(work)], check=True)
    work.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(work)], input=archive, check=True)
    (work / "setup.cfg").write_text(setup_cfg(work))
    # generate the mutants and the test map; the pattern matches nothing, so nothing runs yet
    subprocess.run([mutmut(), "run", "no-such-mutant"], cwd=work, capture_output=True)
    names = [n for ns in sample(work, per_file).values() for n in ns]
    if not names:
        sys.exit(f"error: mutmut generated no mutants in {work} (see {work}/mutants)")
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", ref], check=True, capture_output=True,
                            text=True).stdout.strip()
    print(f"{label}: {len(names)} sampled mutants at {ref} ({commit})", flush=True)
    t0 = time.time()
    subprocess.run([mutmut(), "run", "--max-children", str(children), *names], cwd=work,
                   stdout=subprocess.DEVNULL, check=False)
    info = {"ref": ref, "commit": commit, "per_file": per_file, "children": children, "mutmut": version("mutmut"),
            "command": f"python bench/mutation.py run --ref {ref} --label {label} --per-file {per_file} "
                       f"--children {children}", "wall_s": round(time.time() - t0, 1)}
    (work / "run.json").write_text(json.dumps(info, indent=1) + "\n")


def summarise(work: Path, per_file: int) -> dict[str, object]:
    by_module: dict[str, dict[str, object]] = {}
    total: Counter[str] = Counter()
    for meta in metas(work):
        module = str(meta.relative_to(work / "mutants"))[: -len(".meta")]
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        picked = sample(work, per_file)[module]
        c: Counter[str] = Counter()
        survivors = []
        for name in picked:
            code = codes.get(name)
            kind = ("killed" if code in KILLED else "timeout" if code in TIMEOUT else "survived" if code in SURVIVED
                    else "no_tests" if code in NO_TESTS else "not_checked" if code is None else "other")
            c[kind] += 1
            if kind == "survived":
                survivors.append(name)
        c["sampled"] = len(picked)
        c["generated"] = len(codes)
        total.update(c)
        by_module[module] = {**dict(c), "survived_share": round(c["survived"] / max(c["sampled"], 1), 4),
                             "survivors": survivors}
    info = json.loads((work / "run.json").read_text()) if (work / "run.json").exists() else {}
    return {**info, "tests": present_tests(work),
            "total": {**dict(total), "survived_share": round(total["survived"] / max(total["sampled"], 1), 4)},
            "modules": by_module}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="generate and run the sampled mutants at a git ref")
    r.add_argument("--ref", required=True)
    r.add_argument("--label", required=True)
    s = sub.add_parser("summary", help="write bench/results/mutation.json from finished runs")
    s.add_argument("--label", action="append", required=True)
    for p in (r, s):
        p.add_argument("--workdir", type=Path, default=Path("/tmp/mutwork"))
        p.add_argument("--per-file", type=int, default=30)
    r.add_argument("--children", type=int, default=2)
    a = ap.parse_args()
    if a.cmd == "run":
        run(a.ref, a.label, a.workdir, a.per_file, a.children)
        return
    old = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    runs = old.get("runs", {})
    print(f"{'run':<10} {'module':<44} {'sampled':>7} {'killed':>6} {'timeout':>7} {'survived':>8} {'share':>6}")
    for label in a.label:
        res = summarise(a.workdir / label, a.per_file)
        runs[label] = res
        for module, m in [*res["modules"].items(), ("total", res["total"])]:  # type: ignore[union-attr]
            print(f"{label:<10} {module:<44} {m['sampled']:>7} {m.get('killed', 0):>6} {m.get('timeout', 0):>7} "
                  f"{m.get('survived', 0):>8} {m['survived_share']:>6.1%}")
    out = {**old, "tool": "mutmut", "per_file": a.per_file, "modules": MODULES,
           "summary_command": "python bench/mutation.py summary " + " ".join(f"--label {x}" for x in a.label),
           "runs": runs}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()

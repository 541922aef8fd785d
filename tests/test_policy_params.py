"""Policy parameters on the command line (``srtf:preempt_margin=1``) and the demo's packaged real jobs."""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from cohabit.cli import app
from cohabit.policies import REGISTRY, PolicyParamError, make_policy, policy_list, settable_params
from cohabit.policies.params import parse_policy_spec
from cohabit.policies.srtf import SRTF
from cohabit.policies.tiresias import Tiresias
from cohabit.runtime.runner import check_jobs
from cohabit.spec.yamlio import load_jobs

runner = CliRunner()


def test_parameters_reach_the_constructor_with_the_default_type() -> None:
    p = make_policy("srtf:preempt_margin=1")
    assert isinstance(p, SRTF) and p.preempt_margin == 1.0 and isinstance(p.preempt_margin, float)
    assert p.name == "srtf:preempt_margin=1"
    q = make_policy("srtf:preempt_margin=2.5:preemptive=false")
    assert q.preempt_margin == 2.5 and q.preemptive is False
    t = make_policy("tiresias-gittins:starve_limit=4")
    assert isinstance(t, Tiresias) and t.gittins  # the registry's fixed argument stays


def test_no_parameters_gives_the_registry_default() -> None:
    assert make_policy("srtf").preempt_margin == 60.0
    assert make_policy("srtf").name == "srtf"


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("srtf:foo=1", ["unknown parameter 'foo'", "preempt_margin"]),
        ("srtf:preempt_margin=abc", ["'preempt_margin'", "float", "'abc'"]),
        ("srtf:preemptive=3", ["'preemptive'", "bool"]),
        ("srtf:preempt_margin=-1", ["preempt_margin must be >= 0"]),
        ("srtf:preempt_margin", ["expected KEY=VALUE"]),
        ("srtf:preempt_margin=1:preempt_margin=2", ["given twice"]),
        ("tiresias-gittins:gittins=false", ["unknown parameter 'gittins'"]),
        ("harmony-naive:x=1", ["takes no parameters"]),
        ("harmony:x=1", ["unknown parameter 'x'", "order", "profile_group_jobs"]),
        ("nope:x=1", ["unknown policy 'nope'", "fifo"]),
        (":x=1", ["name is empty"]),
    ],
)
def test_bad_parameters_name_the_key_and_what_was_expected(spec: str, words: list[str]) -> None:
    with pytest.raises(PolicyParamError) as err:
        make_policy(spec)
    for w in words:
        assert w in str(err.value)


def test_oracle_cannot_be_set_as_a_parameter() -> None:
    with pytest.raises(PolicyParamError, match="unknown parameter 'use_oracle'"):
        make_policy("srtf:use_oracle=true")


@given(st.from_regex(r"[a-z][a-z_]{0,8}", fullmatch=True),
       st.dictionaries(st.from_regex(r"[a-z][a-z_0-9]{0,8}", fullmatch=True),
                       st.one_of(st.integers(-10**6, 10**6), st.booleans(),
                                 st.floats(allow_nan=False, allow_infinity=False, width=32)), max_size=4))
def test_parse_round_trips_what_it_is_given(name: str, params: dict[str, object]) -> None:
    def show(v: object) -> str:
        return str(v).lower() if isinstance(v, bool) else repr(v)

    text = name + "".join(f":{k}={show(v)}" for k, v in params.items())
    got_name, got = parse_policy_spec(text)
    assert got_name == name
    assert got.keys() == params.keys()
    for k, v in params.items():
        if isinstance(v, float):
            assert got[k] == pytest.approx(v)
        else:
            assert got[k] == v


def test_every_listed_parameter_can_be_set_to_its_default() -> None:
    for name in REGISTRY:
        for key, default in settable_params(name).items():
            if isinstance(default, (bool, int, float)):
                value = str(default).lower() if isinstance(default, bool) else repr(default)
                assert make_policy(f"{name}:{key}={value}") is not None


def test_policy_list_checks_every_entry() -> None:
    assert policy_list("fifo, srtf:preempt_margin=1") == ["fifo", "srtf:preempt_margin=1"]
    with pytest.raises(PolicyParamError, match="no policy given"):
        policy_list(" , ")
    with pytest.raises(PolicyParamError, match="unknown parameter 'bad'"):
        policy_list("fifo,srtf:bad=1")


def test_simulate_takes_policy_parameters(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    res = runner.invoke(app, ["simulate", "--trace", "tiresias_480", "--limit", "60",
                              "--policy", "srtf,srtf:preempt_margin=0", "--json", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())["policies"]
    assert set(data) == {"srtf", "srtf:preempt_margin=0"}
    assert data["srtf:preempt_margin=0"]["preemptions"] >= data["srtf"]["preemptions"]


def test_cli_reports_a_bad_parameter_and_exits_2() -> None:
    res = runner.invoke(app, ["simulate", "--trace", "tiresias_480", "--policy", "srtf:margin=1"])
    assert res.exit_code == 2
    assert "unknown parameter 'margin'" in res.output


def test_the_demos_real_jobs_are_valid_and_runnable() -> None:
    specs = load_jobs(Path(str(files("cohabit") / "data" / "demo" / "real_jobs.yaml")))
    assert len(specs) >= 5
    assert check_jobs(specs) == []
    from cohabit.cli import DEMO_REAL_POLICIES

    assert policy_list(",".join(DEMO_REAL_POLICIES)) == DEMO_REAL_POLICIES


def test_the_demo_runs_ps_policies_on_the_ps_trace_only() -> None:
    from cohabit.cli import DEMO_PS_POLICIES
    from cohabit.sim.traces import EMBEDDED

    assert set(DEMO_PS_POLICIES) <= set(REGISTRY)
    assert "harmony_80" in EMBEDDED


def test_the_demo_classifies_every_policy() -> None:
    """Each registered policy is in the demo's GPU runs, its PS run, its skip list or the own-workload list
    (a new policy built for a workload of its own must not silently run, or crash, on the GPU traces)."""
    from cohabit.cli import DEMO_OWN_WORKLOAD, DEMO_PS_POLICIES, DEMO_SKIP
    from cohabit.policies import REGISTRY

    assert set(DEMO_OWN_WORKLOAD) <= set(REGISTRY) and not set(DEMO_OWN_WORKLOAD) & set(DEMO_PS_POLICIES)
    gpu = set(REGISTRY) - set(DEMO_SKIP) - set(DEMO_PS_POLICIES) - set(DEMO_OWN_WORKLOAD)
    assert gpu >= {"fifo", "srtf", "tiresias", "gandiva", "themis", "dorm", "pack"}
    assert not gpu & {"drl", "rotary", "rotary-aqp", "mlfs", "pollux", "optimus-oracle"}  # the last needs --oracle

"""Progressive TPC-H queries (cohabit.aqp): merging, accuracy, the envelope estimate, exact resume."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cohabit.aqp import QUERIES, Answer, EnvelopeEstimator, accuracy, query_spec
from cohabit.aqp.accuracy import cell_score
from cohabit.aqp.online import ProgressiveQuery
from cohabit.runtime import safestate

SF = 0.01


def _run(name: str, data, batches: int, seed: int = 0) -> Answer:
    return ProgressiveQuery(QUERIES[name], data, batches=batches, seed=seed, scale_factor=SF).run()


@pytest.mark.parametrize("name", sorted(QUERIES, key=lambda q: int(q[1:])))
def test_aqp_every_query_merges_to_the_one_batch_answer(tpch_dir, name):
    """Merging 6 batches' partial aggregates gives exactly the answer of reading everything at once."""
    whole = _run(name, tpch_dir, 1)
    assert _run(name, tpch_dir, 6, seed=3).rows == whole.rows
    assert whole.columns


REFERENCE = {
    # the plain TPC-H text of a few queries, run directly on the whole tables
    "q6": """SELECT sum(l_extendedprice * l_discount) FROM lineitem WHERE l_shipdate >= DATE '1994-01-01'
             AND l_shipdate < DATE '1995-01-01' AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24""",
    "q13": """SELECT c_count, count(*) AS custdist FROM (SELECT c_custkey, count(o_orderkey) AS c_count
              FROM customer LEFT OUTER JOIN orders ON c_custkey = o_custkey
              AND o_comment NOT LIKE '%special%requests%' GROUP BY c_custkey) GROUP BY c_count
              ORDER BY custdist DESC, c_count DESC""",
    "q18": """SELECT c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice, sum(l_quantity) FROM customer, orders,
              lineitem WHERE o_orderkey IN (SELECT l_orderkey FROM lineitem GROUP BY l_orderkey
              HAVING sum(l_quantity) > 300) AND c_custkey = o_custkey AND o_orderkey = l_orderkey
              GROUP BY c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice
              ORDER BY o_totalprice DESC, o_orderdate, o_orderkey LIMIT 100""",
}


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_aqp_final_answer_equals_the_plain_query(tpch_dir, name):
    import duckdb

    con = duckdb.connect()
    for t in ("lineitem", "orders", "customer"):
        con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{tpch_dir / (t + '.parquet')}')")
    want = con.execute(REFERENCE[name]).fetchall()
    got = _run(name, tpch_dir, 5).rows
    assert [tuple(float(v) if hasattr(v, "as_tuple") else v for v in r) for r in got] == \
           [tuple(float(v) if hasattr(v, "as_tuple") else v for v in r) for r in want]


def test_aqp_batches_are_disjoint_and_cover_the_table(tpch_dir):
    import duckdb

    pq = ProgressiveQuery(QUERIES["q1"], tpch_dir, batches=7, scale_factor=SF)
    total = duckdb.connect().execute(f"SELECT count(*) FROM read_parquet('{tpch_dir / 'lineitem.parquet'}')").fetchone()[0]
    assert sum(pq.batch_rows) == total and min(pq.batch_rows) > 0
    assert sorted(pq.order) == list(range(7))
    assert pq.order != ProgressiveQuery(QUERIES["q1"], tpch_dir, batches=7, seed=1, scale_factor=SF).order
    pq.run()
    assert pq.rows_scanned == total


def test_aqp_scaled_running_answer_estimates_the_total(tpch_dir):
    """Q6's revenue after half the batches, scaled up by 2, is within 15% of the final revenue."""
    pq = ProgressiveQuery(QUERIES["q6"], tpch_dir, batches=10, scale_factor=SF)
    for _ in range(5):
        pq.step()
    half = pq.answer()
    final = pq.run()
    assert abs(float(half.rows[0][0]) - float(final.rows[0][0])) / float(final.rows[0][0]) < 0.15
    assert accuracy(half, final, QUERIES["q6"]) > 0.85


def test_aqp_accuracy_scores_cells_rows_and_weights():
    spec = query_spec(5)
    final = Answer(("n_name", "revenue"), (("A", 100.0), ("B", 50.0)))
    assert accuracy(final, final, spec) == 1.0
    assert accuracy(Answer(final.columns, (("A", 80.0), ("B", 50.0))), final, spec) == pytest.approx((0.8 + 1) / 2)
    assert accuracy(Answer(final.columns, (("A", 125.0), ("B", 50.0))), final, spec) == pytest.approx((0.8 + 1) / 2)
    assert accuracy(Answer(final.columns, (("A", 100.0),)), final, spec) == pytest.approx(0.5)  # B missing
    spurious = Answer(final.columns, (("A", 100.0), ("B", 50.0), ("C", 1.0)))
    assert accuracy(spurious, final, spec) == pytest.approx(2 / 3)
    assert cell_score(-1.0, 1.0) == 0.0 and cell_score(0.0, 0.0) == 1.0
    assert accuracy(Answer(final.columns, ()), Answer(final.columns, ()), spec) == 1.0


def test_aqp_envelope_estimate_is_min_over_max_in_the_window():
    spec = query_spec(6)
    est = EnvelopeEstimator(spec, window=3)
    est.observe(Answer(("revenue",), ((90.0,),)))
    assert est.estimate() == 0.0  # one answer: no evidence
    est.observe(Answer(("revenue",), ((100.0,),)))
    assert est.estimate() == pytest.approx(0.9)
    est.observe(Answer(("revenue",), ((95.0,),)))
    est.observe(Answer(("revenue",), ((99.0,),)))  # 90 left the window
    assert est.estimate() == pytest.approx(0.95)
    assert est.estimate(final=True) == 1.0
    with pytest.raises(ValueError, match="window"):
        EnvelopeEstimator(spec, window=1)


def test_aqp_unknown_query_is_named():
    with pytest.raises(ValueError, match="q1 .. q22"):
        query_spec("q23")


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(["q1", "q3", "q13", "q16", "q18", "q22"]),
       pauses=st.lists(st.integers(min_value=0, max_value=6), max_size=4))
def test_aqp_paused_and_resumed_query_gives_the_uninterrupted_answers(tpch_dir, name, pauses):
    """Ratchet staleness: pausing after any batches, any number of times (a new query each time, the
    checkpoint serialised as the checkpoint store does), neither re-reads nor skips a batch: every
    running answer, every accuracy estimate and the final answer equal the uninterrupted run's."""
    spec = QUERIES[name]
    ref = ProgressiveQuery(spec, tpch_dir, batches=6, seed=2, scale_factor=SF)
    want = []
    while not ref.finished:
        est = ref.step().estimate
        want.append((ref.answer().rows, est))
    got = []
    ckpt = None
    stops = sorted(set(pauses))
    pq = ProgressiveQuery(spec, tpch_dir, batches=6, seed=2, scale_factor=SF)
    while not pq.finished:
        if stops and pq.done == stops[0]:
            stops.pop(0)
            ckpt = safestate.loads(safestate.dumps(pq.checkpoint()))
            pq.close()
            pq = ProgressiveQuery(spec, tpch_dir, batches=6, seed=2, scale_factor=SF)
            pq.restore(ckpt)
            continue
        est = pq.step().estimate
        got.append((pq.answer().rows, est))
    assert got == want
    assert pq.rows_scanned == ref.rows_scanned


def test_aqp_restore_refuses_another_querys_checkpoint(tpch_dir):
    a = ProgressiveQuery(QUERIES["q6"], tpch_dir, batches=4, scale_factor=SF)
    a.step()
    b = ProgressiveQuery(QUERIES["q1"], tpch_dir, batches=4, scale_factor=SF)
    with pytest.raises(ValueError, match="query"):
        b.restore(a.checkpoint())


def test_aqp_explain_memory_estimate(tpch_dir):
    """The plan-based estimate ranks a join-heavy query above a scan-only one, and a running query's
    observed memory raises it (never lowers it)."""
    from cohabit.aqp.estimators import MemoryEstimator, plan_memory_mb

    q9, q6 = plan_memory_mb(QUERIES["q9"], tpch_dir, 10), plan_memory_mb(QUERIES["q6"], tpch_dir, 10)
    assert q9 > q6 >= 0.0
    assert MemoryEstimator.estimate(q9, []) == q9
    assert MemoryEstimator.estimate(q9, [q9 * 3]) == pytest.approx(3.3 * q9)
    assert MemoryEstimator.estimate(q9, [q9 / 10]) == q9


@pytest.mark.parametrize("name", ["q1", "q9", "q18"])
def test_aqp_threads_changed_between_batches_keep_the_exact_answer(tpch_dir, name):
    whole = _run(name, tpch_dir, 6, seed=2)
    pq = ProgressiveQuery(QUERIES[name], tpch_dir, batches=6, seed=2, scale_factor=SF)
    seen = []
    for k in range(6):
        if k == 2:
            pq.set_resources(threads=2, memory_mb=256)
        if k == 4:
            pq.set_resources(threads=1)
        seen.append(pq.threads())
        pq.step()
    assert seen == [1, 1, 2, 2, 1, 1]
    assert pq.answer().rows == whole.rows
    pq.close()

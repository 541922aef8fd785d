"""The 22 TPC-H queries, written for cohabit from the public TPC-H specification, in online-aggregation form.

Each query is split into three parts so that it can run progressively (Liu dissertation §3.2.1:
online aggregation, data processed in batches, partial aggregates merged after each batch):

* ``partial`` — SQL over one *batch* of the sampled table family and the whole of the other
  tables; it returns mergeable rows (group keys and SUM / MIN / MAX columns, or distinct rows);
* ``merge`` — how two partial rows with the same keys combine: ``{column: "sum"|"min"|"max"}``;
  the other columns are keys. A query with no merge columns keeps a *set* of distinct rows;
* ``final`` — SQL over the merged ``state`` table (and the unsampled tables) that returns the
  answer. ``{scale}`` in it is the inverse of the fraction of batches read (the Horvitz-Thompson
  scale-up of additive aggregates, 1 once every batch is read); ``{fraction}`` is Q11's
  ``0.0001 / SF``.

Sampling families: ``orders`` — ``orders`` and ``lineitem`` are cut into batches by a hash of the
order key, so an order and all of its line items fall in the same batch and every per-order
sub-query (Q4, Q18, Q21) is exact within a batch; ``partsupp`` — ``partsupp`` is cut by part key
(Q2, Q11, Q16: the per-part sub-queries are exact within a batch).

Answers are compared on ``keys`` (the columns naming a result row) and ``measures`` (numeric
columns, each with a weight): the accuracy of :mod:`cohabit.aqp.accuracy`. Substitution
parameters are the specification's validation values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Family = Literal["orders", "partsupp"]
Merge = Literal["sum", "min", "max"]


@dataclass(frozen=True)
class QuerySpec:
    """One progressive TPC-H query (see the module docstring)."""

    name: str
    family: Family
    tables: tuple[str, ...]  # every table the query reads
    partial: str
    merge: dict[str, Merge]
    final: str
    keys: tuple[str, ...]
    measures: dict[str, float] = field(default_factory=dict)  # column -> weight; empty: row presence only

    @property
    def is_set(self) -> bool:
        """True when the state is a set of distinct rows (no aggregate to merge)."""
        return not self.merge


_REV = "l_extendedprice * (1 - l_discount)"

_Q: list[QuerySpec] = [
    QuerySpec(
        "q1", "orders", ("lineitem",),
        f"""SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty, sum(l_extendedprice) AS sum_base_price,
                  sum({_REV}) AS sum_disc_price, sum({_REV} * (1 + l_tax)) AS sum_charge,
                  sum(l_discount) AS sum_disc, count(*) AS n
           FROM lineitem WHERE l_shipdate <= DATE '1998-12-01' - INTERVAL 90 DAY
           GROUP BY l_returnflag, l_linestatus""",
        {"sum_qty": "sum", "sum_base_price": "sum", "sum_disc_price": "sum", "sum_charge": "sum",
         "sum_disc": "sum", "n": "sum"},
        """SELECT l_returnflag, l_linestatus, sum_qty * {scale} AS sum_qty, sum_base_price * {scale} AS sum_base_price,
                  sum_disc_price * {scale} AS sum_disc_price, sum_charge * {scale} AS sum_charge,
                  sum_qty / n AS avg_qty, sum_base_price / n AS avg_price, sum_disc / n AS avg_disc,
                  n * {scale} AS count_order
           FROM state ORDER BY l_returnflag, l_linestatus""",
        ("l_returnflag", "l_linestatus"),
        {"sum_qty": 1, "sum_base_price": 1, "sum_disc_price": 1, "sum_charge": 1, "avg_qty": 1, "avg_price": 1,
         "avg_disc": 1, "count_order": 1},
    ),
    QuerySpec(
        "q2", "partsupp", ("part", "supplier", "partsupp", "nation", "region"),
        """SELECT s_acctbal, s_name, n_name, p_partkey, p_mfgr, s_address, s_phone, s_comment
           FROM part, supplier, partsupp, nation, region
           WHERE p_partkey = ps_partkey AND s_suppkey = ps_suppkey AND p_size = 15 AND p_type LIKE '%BRASS'
             AND s_nationkey = n_nationkey AND n_regionkey = r_regionkey AND r_name = 'EUROPE'
             AND ps_supplycost = (SELECT min(ps_supplycost) FROM partsupp, supplier, nation, region
                                  WHERE p_partkey = ps_partkey AND s_suppkey = ps_suppkey
                                    AND s_nationkey = n_nationkey AND n_regionkey = r_regionkey
                                    AND r_name = 'EUROPE')""",
        {},
        """SELECT * FROM state ORDER BY s_acctbal DESC, n_name, s_name, p_partkey LIMIT 100""",
        ("p_partkey", "s_name"), {"s_acctbal": 1},
    ),
    QuerySpec(
        "q3", "orders", ("customer", "orders", "lineitem"),
        f"""SELECT l_orderkey, sum({_REV}) AS revenue, o_orderdate, o_shippriority
           FROM customer, orders, lineitem
           WHERE c_mktsegment = 'BUILDING' AND c_custkey = o_custkey AND l_orderkey = o_orderkey
             AND o_orderdate < DATE '1995-03-15' AND l_shipdate > DATE '1995-03-15'
           GROUP BY l_orderkey, o_orderdate, o_shippriority""",
        {"revenue": "sum"},
        """SELECT l_orderkey, revenue, o_orderdate, o_shippriority FROM state
           ORDER BY revenue DESC, o_orderdate, l_orderkey LIMIT 10""",
        ("l_orderkey",), {"revenue": 1},
    ),
    QuerySpec(
        "q4", "orders", ("orders", "lineitem"),
        """SELECT o_orderpriority, count(*) AS order_count FROM orders
           WHERE o_orderdate >= DATE '1993-07-01' AND o_orderdate < DATE '1993-07-01' + INTERVAL 3 MONTH
             AND EXISTS (SELECT * FROM lineitem WHERE l_orderkey = o_orderkey AND l_commitdate < l_receiptdate)
           GROUP BY o_orderpriority""",
        {"order_count": "sum"},
        """SELECT o_orderpriority, order_count * {scale} AS order_count FROM state ORDER BY o_orderpriority""",
        ("o_orderpriority",), {"order_count": 1},
    ),
    QuerySpec(
        "q5", "orders", ("customer", "orders", "lineitem", "supplier", "nation", "region"),
        f"""SELECT n_name, sum({_REV}) AS revenue
           FROM customer, orders, lineitem, supplier, nation, region
           WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey AND l_suppkey = s_suppkey
             AND c_nationkey = s_nationkey AND s_nationkey = n_nationkey AND n_regionkey = r_regionkey
             AND r_name = 'ASIA' AND o_orderdate >= DATE '1994-01-01' AND o_orderdate < DATE '1995-01-01'
           GROUP BY n_name""",
        {"revenue": "sum"},
        """SELECT n_name, revenue * {scale} AS revenue FROM state ORDER BY revenue DESC, n_name""",
        ("n_name",), {"revenue": 1},
    ),
    QuerySpec(
        "q6", "orders", ("lineitem",),
        """SELECT sum(l_extendedprice * l_discount) AS revenue FROM lineitem
           WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01'
             AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24""",
        {"revenue": "sum"},
        """SELECT revenue * {scale} AS revenue FROM state""",
        (), {"revenue": 1},
    ),
    QuerySpec(
        "q7", "orders", ("supplier", "lineitem", "orders", "customer", "nation"),
        f"""SELECT n1.n_name AS supp_nation, n2.n_name AS cust_nation, extract(year FROM l_shipdate) AS l_year,
                  sum({_REV}) AS revenue
           FROM supplier, lineitem, orders, customer, nation n1, nation n2
           WHERE s_suppkey = l_suppkey AND o_orderkey = l_orderkey AND c_custkey = o_custkey
             AND s_nationkey = n1.n_nationkey AND c_nationkey = n2.n_nationkey
             AND ((n1.n_name = 'FRANCE' AND n2.n_name = 'GERMANY') OR (n1.n_name = 'GERMANY' AND n2.n_name = 'FRANCE'))
             AND l_shipdate BETWEEN DATE '1995-01-01' AND DATE '1996-12-31'
           GROUP BY supp_nation, cust_nation, l_year""",
        {"revenue": "sum"},
        """SELECT supp_nation, cust_nation, l_year, revenue * {scale} AS revenue FROM state
           ORDER BY supp_nation, cust_nation, l_year""",
        ("supp_nation", "cust_nation", "l_year"), {"revenue": 1},
    ),
    QuerySpec(
        "q8", "orders", ("part", "supplier", "lineitem", "orders", "customer", "nation", "region"),
        f"""SELECT extract(year FROM o_orderdate) AS o_year,
                  sum(CASE WHEN n2.n_name = 'BRAZIL' THEN {_REV} ELSE 0 END) AS nation_volume,
                  sum({_REV}) AS volume
           FROM part, supplier, lineitem, orders, customer, nation n1, nation n2, region
           WHERE p_partkey = l_partkey AND s_suppkey = l_suppkey AND l_orderkey = o_orderkey
             AND o_custkey = c_custkey AND c_nationkey = n1.n_nationkey AND n1.n_regionkey = r_regionkey
             AND r_name = 'AMERICA' AND s_nationkey = n2.n_nationkey
             AND o_orderdate BETWEEN DATE '1995-01-01' AND DATE '1996-12-31' AND p_type = 'ECONOMY ANODIZED STEEL'
           GROUP BY o_year""",
        {"nation_volume": "sum", "volume": "sum"},
        """SELECT o_year, nation_volume / volume AS mkt_share FROM state ORDER BY o_year""",
        ("o_year",), {"mkt_share": 1},
    ),
    QuerySpec(
        "q9", "orders", ("part", "supplier", "lineitem", "partsupp", "orders", "nation"),
        """SELECT n_name AS nation, extract(year FROM o_orderdate) AS o_year,
                  sum(l_extendedprice * (1 - l_discount) - ps_supplycost * l_quantity) AS sum_profit
           FROM part, supplier, lineitem, partsupp, orders, nation
           WHERE s_suppkey = l_suppkey AND ps_suppkey = l_suppkey AND ps_partkey = l_partkey
             AND p_partkey = l_partkey AND o_orderkey = l_orderkey AND s_nationkey = n_nationkey
             AND p_name LIKE '%green%'
           GROUP BY n_name, o_year""",
        {"sum_profit": "sum"},
        """SELECT nation, o_year, sum_profit * {scale} AS sum_profit FROM state ORDER BY nation, o_year DESC""",
        ("nation", "o_year"), {"sum_profit": 1},
    ),
    QuerySpec(
        "q10", "orders", ("customer", "orders", "lineitem", "nation"),
        f"""SELECT c_custkey, c_name, sum({_REV}) AS revenue, c_acctbal, n_name, c_address, c_phone, c_comment
           FROM customer, orders, lineitem, nation
           WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey AND o_orderdate >= DATE '1993-10-01'
             AND o_orderdate < DATE '1994-01-01' AND l_returnflag = 'R' AND c_nationkey = n_nationkey
           GROUP BY c_custkey, c_name, c_acctbal, c_phone, n_name, c_address, c_comment""",
        {"revenue": "sum"},
        """SELECT c_custkey, c_name, revenue * {scale} AS revenue, c_acctbal, n_name, c_address, c_phone, c_comment
           FROM state ORDER BY revenue DESC, c_custkey LIMIT 20""",
        ("c_custkey",), {"revenue": 1},
    ),
    QuerySpec(
        "q11", "partsupp", ("partsupp", "supplier", "nation"),
        """SELECT ps_partkey, sum(ps_supplycost * ps_availqty) AS value FROM partsupp, supplier, nation
           WHERE ps_suppkey = s_suppkey AND s_nationkey = n_nationkey AND n_name = 'GERMANY'
           GROUP BY ps_partkey""",
        {"value": "sum"},
        """SELECT ps_partkey, value FROM state
           WHERE value > (SELECT sum(value) FROM state) * {scale} * {fraction}
           ORDER BY value DESC, ps_partkey""",
        ("ps_partkey",), {"value": 1},
    ),
    QuerySpec(
        "q12", "orders", ("orders", "lineitem"),
        """SELECT l_shipmode,
                  sum(CASE WHEN o_orderpriority IN ('1-URGENT', '2-HIGH') THEN 1 ELSE 0 END) AS high_line_count,
                  sum(CASE WHEN o_orderpriority NOT IN ('1-URGENT', '2-HIGH') THEN 1 ELSE 0 END) AS low_line_count
           FROM orders, lineitem
           WHERE o_orderkey = l_orderkey AND l_shipmode IN ('MAIL', 'SHIP') AND l_commitdate < l_receiptdate
             AND l_shipdate < l_commitdate AND l_receiptdate >= DATE '1994-01-01' AND l_receiptdate < DATE '1995-01-01'
           GROUP BY l_shipmode""",
        {"high_line_count": "sum", "low_line_count": "sum"},
        """SELECT l_shipmode, high_line_count * {scale} AS high_line_count, low_line_count * {scale} AS low_line_count
           FROM state ORDER BY l_shipmode""",
        ("l_shipmode",), {"high_line_count": 1, "low_line_count": 1},
    ),
    QuerySpec(
        "q13", "orders", ("customer", "orders"),
        """SELECT c_custkey, count(o_orderkey) AS c_count
           FROM customer LEFT OUTER JOIN orders ON c_custkey = o_custkey AND o_comment NOT LIKE '%special%requests%'
           GROUP BY c_custkey""",
        {"c_count": "sum"},
        """SELECT c_count, count(*) AS custdist FROM state GROUP BY c_count ORDER BY custdist DESC, c_count DESC""",
        ("c_count",), {"custdist": 1},
    ),
    QuerySpec(
        "q14", "orders", ("lineitem", "part"),
        f"""SELECT sum(CASE WHEN p_type LIKE 'PROMO%' THEN {_REV} ELSE 0 END) AS promo, sum({_REV}) AS total
           FROM lineitem, part
           WHERE l_partkey = p_partkey AND l_shipdate >= DATE '1995-09-01' AND l_shipdate < DATE '1995-10-01'""",
        {"promo": "sum", "total": "sum"},
        """SELECT 100.00 * promo / total AS promo_revenue FROM state""",
        (), {"promo_revenue": 1},
    ),
    QuerySpec(
        "q15", "orders", ("lineitem", "supplier"),
        f"""SELECT l_suppkey AS supplier_no, sum({_REV}) AS total_revenue FROM lineitem
           WHERE l_shipdate >= DATE '1996-01-01' AND l_shipdate < DATE '1996-01-01' + INTERVAL 3 MONTH
           GROUP BY l_suppkey""",
        {"total_revenue": "sum"},
        """SELECT s_suppkey, s_name, s_address, s_phone, total_revenue * {scale} AS total_revenue
           FROM supplier, state
           WHERE s_suppkey = supplier_no AND total_revenue = (SELECT max(total_revenue) FROM state)
           ORDER BY s_suppkey""",
        ("s_suppkey",), {"total_revenue": 1},
    ),
    QuerySpec(
        "q16", "partsupp", ("partsupp", "part", "supplier"),
        """SELECT DISTINCT p_brand, p_type, p_size, ps_suppkey FROM partsupp, part
           WHERE p_partkey = ps_partkey AND p_brand <> 'Brand#45' AND p_type NOT LIKE 'MEDIUM POLISHED%'
             AND p_size IN (49, 14, 23, 45, 19, 3, 36, 9)
             AND ps_suppkey NOT IN (SELECT s_suppkey FROM supplier WHERE s_comment LIKE '%Customer%Complaints%')""",
        {},
        """SELECT p_brand, p_type, p_size, count(DISTINCT ps_suppkey) AS supplier_cnt FROM state
           GROUP BY p_brand, p_type, p_size ORDER BY supplier_cnt DESC, p_brand, p_type, p_size""",
        ("p_brand", "p_type", "p_size"), {"supplier_cnt": 1},
    ),
    QuerySpec(
        "q17", "orders", ("lineitem", "part"),
        """SELECT l_partkey, l_quantity, sum(l_extendedprice) AS price, count(*) AS n FROM lineitem, part
           WHERE p_partkey = l_partkey AND p_brand = 'Brand#23' AND p_container = 'MED BOX'
           GROUP BY l_partkey, l_quantity""",
        {"price": "sum", "n": "sum"},
        """WITH per_part AS (SELECT l_partkey, sum(l_quantity * n) / sum(n) AS avg_qty FROM state GROUP BY l_partkey)
           SELECT sum(price) * {scale} / 7.0 AS avg_yearly FROM state JOIN per_part USING (l_partkey)
           WHERE l_quantity < 0.2 * avg_qty""",
        (), {"avg_yearly": 1},
    ),
    QuerySpec(
        "q18", "orders", ("customer", "orders", "lineitem"),
        """SELECT c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice, sum(l_quantity) AS total_qty
           FROM customer, orders, lineitem
           WHERE o_orderkey IN (SELECT l_orderkey FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 300)
             AND c_custkey = o_custkey AND o_orderkey = l_orderkey
           GROUP BY c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice""",
        {"total_qty": "sum"},
        """SELECT * FROM state ORDER BY o_totalprice DESC, o_orderdate, o_orderkey LIMIT 100""",
        ("o_orderkey",), {"total_qty": 1},
    ),
    QuerySpec(
        "q19", "orders", ("lineitem", "part"),
        f"""SELECT sum({_REV}) AS revenue FROM lineitem, part
           WHERE p_partkey = l_partkey AND l_shipmode IN ('AIR', 'AIR REG') AND l_shipinstruct = 'DELIVER IN PERSON'
             AND ((p_brand = 'Brand#12' AND p_container IN ('SM CASE', 'SM BOX', 'SM PACK', 'SM PKG')
                   AND l_quantity BETWEEN 1 AND 11 AND p_size BETWEEN 1 AND 5)
               OR (p_brand = 'Brand#23' AND p_container IN ('MED BAG', 'MED BOX', 'MED PKG', 'MED PACK')
                   AND l_quantity BETWEEN 10 AND 20 AND p_size BETWEEN 1 AND 10)
               OR (p_brand = 'Brand#34' AND p_container IN ('LG CASE', 'LG BOX', 'LG PACK', 'LG PKG')
                   AND l_quantity BETWEEN 20 AND 30 AND p_size BETWEEN 1 AND 15))""",
        {"revenue": "sum"},
        """SELECT revenue * {scale} AS revenue FROM state""",
        (), {"revenue": 1},
    ),
    QuerySpec(
        "q20", "orders", ("lineitem", "part", "partsupp", "supplier", "nation"),
        """SELECT l_partkey, l_suppkey, sum(l_quantity) AS qty FROM lineitem
           WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01'
             AND l_partkey IN (SELECT p_partkey FROM part WHERE p_name LIKE 'forest%')
           GROUP BY l_partkey, l_suppkey""",
        {"qty": "sum"},
        """SELECT s_name, s_address FROM supplier, nation
           WHERE s_suppkey IN (SELECT ps_suppkey FROM partsupp, state
                               WHERE ps_partkey = l_partkey AND ps_suppkey = l_suppkey
                                 AND ps_availqty > 0.5 * qty * {scale})
             AND s_nationkey = n_nationkey AND n_name = 'CANADA'
           ORDER BY s_name""",
        ("s_name",), {},
    ),
    QuerySpec(
        "q21", "orders", ("supplier", "lineitem", "orders", "nation"),
        """SELECT s_name, count(*) AS numwait FROM supplier, lineitem l1, orders, nation
           WHERE s_suppkey = l1.l_suppkey AND o_orderkey = l1.l_orderkey AND o_orderstatus = 'F'
             AND l1.l_receiptdate > l1.l_commitdate
             AND EXISTS (SELECT * FROM lineitem l2 WHERE l2.l_orderkey = l1.l_orderkey AND l2.l_suppkey <> l1.l_suppkey)
             AND NOT EXISTS (SELECT * FROM lineitem l3 WHERE l3.l_orderkey = l1.l_orderkey
                             AND l3.l_suppkey <> l1.l_suppkey AND l3.l_receiptdate > l3.l_commitdate)
             AND s_nationkey = n_nationkey AND n_name = 'SAUDI ARABIA'
           GROUP BY s_name""",
        {"numwait": "sum"},
        """SELECT s_name, numwait * {scale} AS numwait FROM state ORDER BY numwait DESC, s_name LIMIT 100""",
        ("s_name",), {"numwait": 1},
    ),
    QuerySpec(
        "q22", "orders", ("customer", "orders"),
        """SELECT DISTINCT o_custkey FROM orders, customer
           WHERE c_custkey = o_custkey AND substring(c_phone, 1, 2) IN ('13', '31', '23', '29', '30', '18', '17')""",
        {},
        """SELECT cntrycode, count(*) AS numcust, sum(c_acctbal) AS totacctbal
           FROM (SELECT substring(c_phone, 1, 2) AS cntrycode, c_acctbal FROM customer
                 WHERE substring(c_phone, 1, 2) IN ('13', '31', '23', '29', '30', '18', '17')
                   AND c_acctbal > (SELECT avg(c_acctbal) FROM customer WHERE c_acctbal > 0.00
                                    AND substring(c_phone, 1, 2) IN ('13', '31', '23', '29', '30', '18', '17'))
                   AND NOT EXISTS (SELECT * FROM state WHERE o_custkey = c_custkey))
           GROUP BY cntrycode ORDER BY cntrycode""",
        ("cntrycode",), {"numcust": 1, "totacctbal": 1},
    ),
]

#: Query name (``q1`` .. ``q22``) -> its progressive form.
QUERIES: dict[str, QuerySpec] = {q.name: q for q in _Q}

#: Table 3.1 of the dissertation: query weight classes by observed memory consumption.
CLASSES: dict[str, tuple[str, ...]] = {
    "light": ("q1", "q2", "q4", "q6", "q10", "q11", "q12", "q13", "q14", "q15", "q16", "q19", "q22"),
    "medium": ("q3", "q5", "q8", "q17", "q20"),
    "heavy": ("q7", "q9", "q18", "q21"),
}
#: Query name -> its Table 3.1 class.
WEIGHT_CLASSES: dict[str, str] = {q: c for c, qs in CLASSES.items() for q in qs}


def query_spec(name: str | int) -> QuerySpec:
    """The query ``name`` (``"q5"``, ``"5"`` or ``5``); ValueError naming the known ones."""
    key = f"q{name}" if isinstance(name, int) or str(name).isdigit() else str(name).lower()
    try:
        return QUERIES[key]
    except KeyError:
        raise ValueError(f"unknown TPC-H query {name!r}; known: q1 .. q22") from None

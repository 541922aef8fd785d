"""Progressive (approximate) TPC-H queries on DuckDB: online aggregation, accuracy, checkpoints.

See ``docs/aqp.md``. :mod:`.queries` holds the 22 queries in online-aggregation form,
:mod:`.online` runs one batch by batch, :mod:`.accuracy` scores answers, :mod:`.data` generates
TPC-H data with ``tpchgen-cli``. DuckDB is imported only when a query runs.
"""

from .accuracy import Answer, EnvelopeEstimator, accuracy
from .queries import CLASSES, QUERIES, QuerySpec, query_spec

__all__ = ["Answer", "CLASSES", "EnvelopeEstimator", "QUERIES", "QuerySpec", "accuracy", "query_spec"]

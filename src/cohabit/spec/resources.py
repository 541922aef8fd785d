"""Resources: a named, immutable vector of quantities (cpu, gpu, mem_gb, ...).

Every demand and capacity in cohabit is a :class:`Resources`. Names are free:
the well-known ones are :data:`STANDARD`, and any other name (``fpga``,
``ssd_gb``) works the same way. Missing names count as zero.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

STANDARD: tuple[str, ...] = ("cpu", "gpu", "mem_gb", "net_gbps", "gpu_mem_gb")


class Resources(Mapping[str, float]):
    """An immutable named vector; arithmetic is element-wise, missing names are 0.

    >>> Resources(cpu=4, gpu=1) + Resources(gpu=1)
    Resources(cpu=4.0, gpu=2.0)
    """

    __slots__ = ("_v",)

    def __init__(self, values: Mapping[str, float] | None = None, /, **kw: float) -> None:
        merged: dict[str, float] = {}
        for src in (values or {}), kw:
            for name, qty in src.items():
                if not isinstance(name, str) or not name:
                    raise ValueError(f"resource name must be a non-empty string, got {name!r}")
                try:
                    q = float(qty)
                except (TypeError, ValueError):
                    raise ValueError(f"resource {name!r}: expected a number, got {qty!r}") from None
                if q != q or q in (float("inf"), float("-inf")):
                    raise ValueError(f"resource {name!r}: expected a finite number, got {qty!r}")
                if q != 0.0:
                    merged[name] = q
        self._v = merged

    # Mapping protocol -------------------------------------------------
    def __getitem__(self, name: str) -> float:
        return self._v.get(name, 0.0)

    def __iter__(self) -> Iterator[str]:
        return iter(self._v)

    def __len__(self) -> int:
        return len(self._v)

    def __contains__(self, name: object) -> bool:
        return name in self._v

    def get(self, name: str, default: Any = 0.0) -> Any:  # type: ignore[override]
        return self._v.get(name, default)

    # fast paths (the Mapping mixins iterate through __getitem__)
    def items(self):  # type: ignore[no-untyped-def, override]
        return self._v.items()

    def keys(self):  # type: ignore[no-untyped-def, override]
        return self._v.keys()

    def values(self):  # type: ignore[no-untyped-def, override]
        return self._v.values()

    # Arithmetic -------------------------------------------------------
    def _combine(self, other: Mapping[str, float], sign: float) -> Resources:
        out = dict(self._v)
        for k, q in other.items():
            out[k] = out.get(k, 0.0) + sign * q
        return Resources(out)

    def __add__(self, other: Mapping[str, float]) -> Resources:
        return self._combine(other, 1.0)

    def __sub__(self, other: Mapping[str, float]) -> Resources:
        return self._combine(other, -1.0)

    def __mul__(self, k: float) -> Resources:
        return Resources({n: q * k for n, q in self._v.items()})

    __rmul__ = __mul__

    def __eq__(self, other: object) -> bool:
        """Exact equality (missing names are 0), consistent with ``__hash__``; see :meth:`isclose`."""
        if isinstance(other, Resources):
            return self._v == other._v
        if isinstance(other, Mapping):
            names = set(self._v) | set(other)
            return all(self[n] == float(other.get(n, 0.0)) for n in names)
        return NotImplemented

    def isclose(self, other: Mapping[str, float], tol: float = 1e-9) -> bool:
        """Equality within ``tol`` per component (for sums of floats)."""
        names = set(self._v) | set(other)
        return all(abs(self[n] - float(other.get(n, 0.0))) <= tol for n in names)

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._v.items())))

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in sorted(self._v.items()))
        return f"Resources({inner})"

    # Queries ----------------------------------------------------------
    def fits_in(self, capacity: Mapping[str, float], eps: float = 1e-9) -> bool:
        """True if every component is at most the same component of ``capacity``."""
        return all(q <= capacity.get(n, 0.0) + eps for n, q in self._v.items())

    def is_nonnegative(self, eps: float = 1e-9) -> bool:
        return all(q >= -eps for q in self._v.values())

    def dominant_share(self, capacity: Mapping[str, float]) -> float:
        """max_r demand_r / capacity_r over the resources in ``capacity`` (DRF, Ghodsi et al.)."""
        shares = [q / capacity[n] for n, q in self._v.items() if capacity.get(n, 0.0) > 0]
        return max(shares, default=0.0)

    def as_dict(self) -> dict[str, float]:
        return dict(self._v)

    @classmethod
    def total(cls, items: Iterable[Mapping[str, float]]) -> Resources:
        out: dict[str, float] = {}
        for r in items:
            for k, q in r.items():
                out[k] = out.get(k, 0.0) + q
        return cls(out)

    # pydantic integration: accept a mapping, serialise as a dict.
    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        def validate(v: Any) -> Resources:
            if isinstance(v, Resources):
                return v
            if not isinstance(v, Mapping):
                raise ValueError(f"expected a mapping of resource name to quantity, got {v!r}")
            r = Resources(v)
            if not r.is_nonnegative():
                bad = {k: q for k, q in r.items() if q < 0}
                raise ValueError(f"resource quantities must be >= 0, got {bad}")
            return r

        return core_schema.no_info_plain_validator_function(
            validate, serialization=core_schema.plain_serializer_function_ser_schema(lambda r: r.as_dict())
        )

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: Any, handler: Any) -> dict[str, Any]:
        return {
            "type": "object",
            "additionalProperties": {"type": "number", "minimum": 0},
            "description": "resource name -> quantity (cpu, gpu, mem_gb, net_gbps, gpu_mem_gb, or any other name)",
        }

"""Resources: a named vector. Arithmetic laws, queries, validation and pydantic integration."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from cohabit.spec import STANDARD, NodeSpec, Resources

NAMES = [*STANDARD, "fpga", "ssd_gb"]

# Quantities on a 1/8 grid stay exact under +, - and small integer scaling,
# so the laws below hold exactly rather than within a tolerance.
quantities = st.integers(min_value=0, max_value=8 * 10**6).map(lambda n: n / 8)
signed = st.integers(min_value=-8 * 10**6, max_value=8 * 10**6).map(lambda n: n / 8)
vectors = st.dictionaries(st.sampled_from(NAMES), quantities, max_size=len(NAMES)).map(Resources)
signed_vectors = st.dictionaries(st.sampled_from(NAMES), signed, max_size=len(NAMES)).map(Resources)
scalars = st.integers(min_value=-16, max_value=16)


@given(signed_vectors, signed_vectors)
def test_resources_addition_commutes(a: Resources, b: Resources) -> None:
    assert a + b == b + a


@given(signed_vectors, signed_vectors, signed_vectors)
def test_resources_addition_associates(a: Resources, b: Resources, c: Resources) -> None:
    assert (a + b) + c == a + (b + c)


@given(signed_vectors)
def test_resources_zero_and_inverse(a: Resources) -> None:
    zero = Resources()
    assert a + zero == a
    assert a - a == zero
    assert len(a - a) == 0  # zero components are dropped
    assert (a - a).as_dict() == {}


@given(signed_vectors, signed_vectors, scalars)
def test_resources_scaling_distributes(a: Resources, b: Resources, k: int) -> None:
    assert k * (a + b) == k * a + k * b
    assert (a * k) == (k * a)
    assert 0 * a == Resources()


@given(signed_vectors, signed_vectors)
def test_resources_subtraction_undoes_addition(a: Resources, b: Resources) -> None:
    assert (a + b) - b == a


@given(st.lists(signed_vectors, max_size=6))
def test_resources_total_is_the_sum(items: list[Resources]) -> None:
    acc = Resources()
    for r in items:
        acc = acc + r
    assert Resources.total(items) == acc


@given(signed_vectors)
def test_missing_names_read_as_zero(a: Resources) -> None:
    for name in NAMES:
        assert a[name] == a.get(name, 0.0)
        assert (name in a) == (a[name] != 0.0)
    assert a["not_a_resource"] == 0.0


@given(signed_vectors, signed_vectors)
def test_equal_vectors_hash_equal(a: Resources, b: Resources) -> None:
    c = Resources(a.as_dict())
    assert c == a and hash(c) == hash(a)
    if a == b:
        assert hash(a) == hash(b)


@given(vectors, vectors)
def test_a_demand_fits_in_itself_plus_anything_nonnegative(a: Resources, b: Resources) -> None:
    assert a.fits_in(a)
    assert a.fits_in(a + b)
    assert (a + b).is_nonnegative()


@given(vectors, st.sampled_from(NAMES))
def test_a_demand_bigger_somewhere_does_not_fit(a: Resources, name: str) -> None:
    bigger = a + Resources({name: 1.0})
    assert not bigger.fits_in(a)


@given(vectors, vectors, st.integers(min_value=1, max_value=16))
def test_dominant_share_is_the_largest_share_and_scales(a: Resources, cap: Resources, k: int) -> None:
    share = a.dominant_share(cap)
    expected = max((a[n] / cap[n] for n in a if cap[n] > 0), default=0.0)
    assert share == expected
    assert (k * a).dominant_share(cap) == pytest.approx(k * share)
    assert share >= 0.0
    if a.fits_in(cap):
        assert share <= 1.0 + 1e-9


def test_dominant_share_ignores_resources_the_cluster_lacks() -> None:
    demand = Resources(gpu=1, cpu=4, fpga=1)
    assert demand.dominant_share(Resources(gpu=4, cpu=8)) == 0.5


def test_repr_and_mapping_protocol() -> None:
    r = Resources({"cpu": 4}, gpu=1)
    assert repr(r) == "Resources(cpu=4.0, gpu=1.0)"
    assert dict(r) == {"cpu": 4.0, "gpu": 1.0}
    assert sorted(r) == ["cpu", "gpu"]
    assert r == {"cpu": 4, "gpu": 1, "mem_gb": 0}


@pytest.mark.parametrize(
    ("values", "fragment"),
    [
        ({"gpu": float("nan")}, "resource 'gpu': expected a finite number"),
        ({"gpu": math.inf}, "resource 'gpu': expected a finite number"),
        ({"cpu": "four"}, "resource 'cpu': expected a number, got 'four'"),
        ({"": 1}, "non-empty string"),
        ({3: 1}, "non-empty string, got 3"),
    ],
)
def test_bad_quantities_are_rejected_naming_them(values: dict, fragment: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ValueError) as info:
        Resources(values)
    assert fragment in str(info.value)


def test_pydantic_fields_accept_mappings_and_reject_negative_quantities() -> None:
    node = NodeSpec(name="n0", capacity={"gpu": 4, "cpu": 32})
    assert isinstance(node.capacity, Resources) and node.capacity["gpu"] == 4.0
    assert node.model_dump(mode="json")["capacity"] == {"gpu": 4.0, "cpu": 32.0}
    assert NodeSpec.model_validate(node.model_dump(mode="json")) == node
    with pytest.raises(ValidationError) as info:
        NodeSpec(name="n0", capacity={"gpu": -1})
    (err,) = info.value.errors()
    assert err["loc"] == ("capacity",)
    assert "must be >= 0" in err["msg"] and "'gpu': -1.0" in err["msg"]
    with pytest.raises(ValidationError, match="expected a mapping"):
        NodeSpec(name="n0", capacity=4)

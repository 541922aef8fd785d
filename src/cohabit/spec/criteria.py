"""PLACEHOLDER — being written (criteria parser)."""
from typing import Any
Criterion = Any
def parse_criterion(text: str) -> Any:
    raise NotImplementedError("criteria parser not written yet")

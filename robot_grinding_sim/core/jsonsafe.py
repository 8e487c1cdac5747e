"""JSON-safe conversion of results (numpy arrays and scalars, non-finite floats)."""

from __future__ import annotations

import math
from typing import Any


def json_safe(obj: Any) -> Any:
    """``obj`` with numpy arrays/scalars as lists/floats, tuples as lists, NaN and inf as None."""
    if hasattr(obj, "tolist"):
        obj = obj.tolist()
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj

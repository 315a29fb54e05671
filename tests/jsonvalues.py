"""Hypothesis strategies for arbitrary JSON values (what a peer may send anywhere)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st


def json_values(*, max_leaves: int = 20, key_size: int = 8) -> st.SearchStrategy[Any]:
    """Any JSON value: null, booleans, integers, finite floats, short strings, and lists
    and objects of them (``key_size``: the longest object key)."""
    scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    return st.recursive(
        scalars | st.text(max_size=8),
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(st.text(max_size=key_size), inner, max_size=4)
        ),
        max_leaves=max_leaves,
    )

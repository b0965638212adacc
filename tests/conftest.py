"""Shared pytest fixtures for the eyefold tests."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest


def _assert_bit_identical(actual: np.ndarray, expected: np.ndarray) -> None:
    """Fails unless both arrays have the same dtype, shape and raw bytes."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape}"
    assert actual.tobytes() == expected.tobytes(), (
        f"bytes differ:\nactual={actual!r}\nexpected={expected!r}"
    )


@pytest.fixture(scope="session")
def assert_bit_identical() -> Callable[[np.ndarray, np.ndarray], None]:
    """Returns ``check(actual, expected)``: same dtype, same shape, same raw bytes.

    Session-scoped so hypothesis tests can use it too.
    """
    return _assert_bit_identical

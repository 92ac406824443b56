# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""When the pages may call one timing faster than another.

Every results file under ``benchmarks/`` records, for each timed cell, the median time
of its blocks (``median_s``) and their interquartile range (``iqr_s``, the middle half
of the blocks: the spread). Two cells are *separated* when their medians differ by more
than the spread of each:

    |median_a - median_b| > iqr_a  and  |median_a - median_b| > iqr_b

Only then does a page call the lower one faster; otherwise it says the two tie at that
length. ``verdict`` gives the word, ``tally`` counts the words over many pairs, and
``first_separated`` finds where a series of pairs starts to separate. Not a model
module.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

FASTER, SLOWER, TIED = "faster", "slower", "tied"


def _median_and_spread(cell: Mapping, name: str) -> tuple[float, float]:
    if not isinstance(cell, Mapping):
        raise TypeError(
            f"{name} must be a results row (a dict), got {type(cell).__name__}"
        )
    missing = [key for key in ("median_s", "iqr_s") if key not in cell]
    if missing:
        raise ValueError(
            f"{name} has no {' or '.join(missing)}: got the keys {sorted(cell)}"
        )
    median, spread = cell["median_s"], cell["iqr_s"]
    if not median > 0 or not spread >= 0:
        raise ValueError(
            f"{name} needs median_s > 0 and iqr_s >= 0, got {median!r} and {spread!r}"
        )
    return median, spread


def separated(a: Mapping, b: Mapping) -> bool:
    """Whether the medians of ``a`` and ``b`` differ by more than the spread of each."""
    median_a, spread_a = _median_and_spread(a, "a")
    median_b, spread_b = _median_and_spread(b, "b")
    gap = abs(median_a - median_b)
    return gap > spread_a and gap > spread_b


def verdict(a: Mapping, b: Mapping) -> str:
    """``"faster"`` where ``a`` takes less time than ``b`` and the two are separated,
    ``"slower"`` where it takes more and they are separated, ``"tied"`` otherwise."""
    if not separated(a, b):
        return TIED
    return FASTER if a["median_s"] < b["median_s"] else SLOWER


def tally(pairs: Iterable[tuple[Mapping, Mapping]]) -> dict[str, int]:
    """How many of the ``(a, b)`` pairs give each verdict, ``a`` against ``b``."""
    counts = {FASTER: 0, SLOWER: 0, TIED: 0}
    for a, b in pairs:
        counts[verdict(a, b)] += 1
    return counts


def first_separated(pairs: Mapping[int, tuple[Mapping, Mapping]], word: str = FASTER):
    """The first key (a length, in increasing order) from which every pair's verdict is
    ``word``; None if the last pair's is not."""
    if word not in (FASTER, SLOWER, TIED):
        raise ValueError(
            f"word must be {FASTER!r}, {SLOWER!r} or {TIED!r}, got {word!r}"
        )
    first = None
    for key in sorted(pairs):
        if verdict(*pairs[key]) == word:
            first = key if first is None else first
        else:
            first = None
    return first

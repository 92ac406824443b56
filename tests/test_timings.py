"""llm_attention_site.timings: a page calls one timing faster only where the medians differ by
more than the spread of each; and the committed results files give the verdicts the pages
print (the cases the pages' prose relies on, worked out here by hand from the files' numbers)."""

from __future__ import annotations

import json
import pathlib

import pytest

from llm_attention_site.timings import (
    FASTER,
    SLOWER,
    TIED,
    first_separated,
    separated,
    tally,
    verdict,
)

ROOT = pathlib.Path(__file__).resolve().parents[1]


def cell(median_ms, spread_ms):
    return {"median_s": median_ms / 1e3, "iqr_s": spread_ms / 1e3}


@pytest.mark.parametrize("a, b, word", [
    # the linear-attention page's tie at 4,096 held: 21.32 (5.72) against 22.20 (4.50)
    (cell(21.32, 5.72), cell(22.20, 4.50), TIED),
    # its first clear win, at 8,192: 20.84 (5.31) against 28.60 (7.25)
    (cell(20.84, 5.31), cell(28.60, 7.25), FASTER),
    (cell(28.60, 7.25), cell(20.84, 5.31), SLOWER),
    # the gap (5) beats the smaller spread (1) but not the larger (6): still a tie
    (cell(10, 1), cell(15, 6), TIED),
    (cell(15, 6), cell(10, 1), TIED),
    # a gap equal to a spread is not more than it
    (cell(10, 1), cell(12, 2), TIED),
    (cell(10, 0), cell(10, 0), TIED),
    (cell(10, 0), cell(10.001, 0), FASTER),
])
def test_verdict_needs_the_gap_to_beat_both_spreads(a, b, word):
    assert verdict(a, b) == word
    assert separated(a, b) == (word != TIED) == separated(b, a)


def test_tally_and_first_separated():
    rows = {1: (cell(10, 3), cell(11, 3)), 2: (cell(10, 1), cell(20, 1)),
            3: (cell(10, 1), cell(10.5, 1)), 4: (cell(10, 1), cell(30, 1)),
            5: (cell(10, 1), cell(40, 2))}
    assert tally(rows.values()) == {FASTER: 3, SLOWER: 0, TIED: 2}
    assert first_separated(rows) == 4  # 2 wins, but 3 ties again: the run of wins starts at 4
    assert first_separated(rows, TIED) is None  # the last pair is no tie
    assert first_separated({}) is None


@pytest.mark.parametrize("bad, error", [
    ({"median_s": 1.0}, ValueError),  # no spread
    ({"iqr_s": 0.1}, ValueError),  # no median
    ({"median_s": 0.0, "iqr_s": 0.1}, ValueError),
    ({"median_s": 1.0, "iqr_s": -0.1}, ValueError),
    ({"median_s": float("nan"), "iqr_s": 0.1}, ValueError),
    ([1.0, 0.1], TypeError),
])
def test_bad_rows_are_refused_with_what_was_wrong(bad, error):
    with pytest.raises(error, match="median_s|iqr_s|results row"):
        verdict(bad, cell(1, 0.1))
    with pytest.raises(error):
        verdict(cell(1, 0.1), bad)


def test_bad_word_is_refused():
    with pytest.raises(ValueError, match="'quicker'"):
        first_separated({1: (cell(1, 0), cell(2, 0))}, "quicker")


def _decode(stem):
    report = json.loads((ROOT / "benchmarks" / f"{stem}_results.json").read_text())
    return {(r["setting"], r["held"]): r for r in report["results"]}


def test_the_decode_files_give_the_verdicts_the_pages_print():
    """Hand-checked from the files: median and spread (ms) of each cell named."""
    linear = _decode("linear_decode")
    assert [verdict(linear["gdn", h], linear["gqa", h])
            for h in (1024, 2048, 4096, 8192, 16384, 32768)] == [TIED] * 3 + [FASTER] * 3
    sparse = _decode("sparse_decode")  # 195.3 (26.8) vs 205.6 (24.2); 203.8 (12.9) vs 258.0 (37.3)
    assert verdict(sparse["sparse_gathered", 4096], sparse["dense", 4096]) == TIED
    assert verdict(sparse["sparse_gathered", 8192], sparse["dense", 8192]) == FASTER
    latent = _decode("latent_decode")  # 83.1 (5.3) vs 81.6 (4.7)
    assert verdict(latent["mla_absorbed", 1024], latent["gqa", 1024]) == TIED

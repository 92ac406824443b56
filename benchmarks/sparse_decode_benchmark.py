"""Decoding one token with sparse latent attention (DeepSeek-V3.2's indexer and top-k) against
dense latent attention, one layer at DeepSeek-V3.2's widths, against the memory bandwidth of the
machine measured in the same run.

One ``SparseLatentAttention`` (float32, eval mode, batch 1, the fast path, at DeepSeek-V3.2's
published sizes as ``sparse_costs.DEEPSEEK_V32`` reads them from the family table: model width
7,168, 128 heads, latent 512 + 64, 64 indexer heads of 128, top-k 2,048) serves the three
settings, each with a cache of its own:

- ``dense``: ``LatentAttention``'s own forward on the same weights and the same latent cache
  (absorbed: the way latent attention decodes), every held token attended to;
- ``sparse_masked``: the indexer picks 2,048 tokens, then attention runs over all held tokens
  with the others masked (the reference's form; absorbed);
- ``sparse_gathered``: the indexer picks 2,048 tokens and attention runs over those alone.

For each number of tokens held (4,096 to 65,536) one new token is decoded; the driver
(``decode.py``) fills the caches with random numbers, times the settings in turns, one length
at a time (median and spread over blocks), and puts each cache back to the same length after
each call.

Bytes a step must read: every weight it uses once (the indexer's too, for the sparse settings),
and the cache numbers it reads: every latent row (dense, masked), every indexer key (sparse),
the 2,048 chosen rows (gathered). Divided by the time, that is the bandwidth achieved; the driver
measures the machine's own on one thread before the first length and after each one, and keeps
the best.

The byte counts predict where the gathered form starts to win. Per held token it reads an
indexer key of 128 numbers instead of a latent row of 576, but it adds the indexer's weights
and the 2,048 rows it gathers: the totals cross at about 33,800 tokens at batch 1. Goal: the
gathered form faster than the dense one at every held length from that one (the grid's next).
The run also prints the length from which it was faster at every longer length, and where
each step's time goes (a profile at the longest length).

The driver (``decode.py``) writes ``benchmarks/sparse_decode_results.json`` and the figure the page
draws from it, ``benchmarks/sparse_decode_benchmark.svg``; ``--quick`` checks the script in seconds.
"""

from __future__ import annotations

import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from decode import (  # noqa: E402
    Setting, run_script, shares_of_bandwidth, weight_bytes, widths,
)

from llm_attention.latent import LatentAttention  # noqa: E402
from llm_attention.sparse_latent import SparseLatentAttention  # noqa: E402
from llm_attention_site.benchmark_plots import SPARSE_SETTINGS  # noqa: E402
from llm_attention_site.sparse_costs import DEEPSEEK_V32  # noqa: E402

LABELS = {setting: spec[0] for setting, spec in SPARSE_SETTINGS.items()}  # the figure's
SETTINGS = tuple(LABELS)
SIZES = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
         "index_n_heads", "index_head_dim")


def sizes(shrink: int, top_k: int) -> dict:
    """DeepSeek-V3.2's published sizes, widths divided by ``shrink``."""
    fields = dict(d_model="hidden_size", num_heads="num_attention_heads",
                  **{name: name for name in SIZES})
    return dict(widths(DEEPSEEK_V32[1], shrink, fields), index_topk=top_k)


FULL = dict(sizes(1, DEEPSEEK_V32[1]["index_topk"]), held=[4096, 8192, 16384, 32768, 65536],
            rounds=5, min_run_time=0.4, bandwidth_mib=1024)
QUICK = dict(sizes(8, 16), held=[32, 64], rounds=1, min_run_time=0.001, bandwidth_mib=16)
BYTES = 4  # float32


def build(config: dict):
    options = {k: config[k] for k in (*SIZES, "index_topk")}
    return lambda context_length: SparseLatentAttention(
        config["d_model"], config["d_model"], context_length, 0.0, config["num_heads"],
        absorb=True, fast_path=True, **options)


def fill(layer, held: int):
    """A cache of ``layer`` holding ``held`` random tokens, with room for one more."""
    cache = layer.make_cache(1)
    cache.append(torch.randn(1, held, layer.kv_lora_rank),
                 torch.randn(1, held, layer.qk_rope_head_dim),
                 torch.randn(1, held, layer.indexer.head_dim))
    return cache


def row_bytes(layer) -> int:
    return (layer.kv_lora_rank + layer.qk_rope_head_dim) * BYTES  # one latent row


def cache_read(setting: str):
    """Bytes of the cache a step reads: every latent row (dense, masked), every indexer key
    (sparse), the top-k rows (gathered)."""
    def count(layer, cache, held: int) -> int:
        key = layer.indexer.head_dim * BYTES  # one indexer key
        if setting == "dense":
            return held * row_bytes(layer)
        if setting == "sparse_masked":
            return held * (row_bytes(layer) + key)
        return held * key + min(layer.index_topk, held) * row_bytes(layer)

    return count


def latent_weights(layer) -> int:
    """The weights of LatentAttention: all but the indexer's."""
    return weight_bytes(layer) - weight_bytes(layer.indexer)


def step(setting: str):
    def decode(layer, x, cache):
        if setting == "dense":  # the same layer's latent attention, every token
            LatentAttention.forward(layer, x, cache=cache.latent)
        else:
            layer.gathered = setting == "sparse_gathered"
            layer(x, cache=cache)

    return decode


def rewind(cache, held: int) -> None:
    cache.latent.length = held  # back to the same position for the next call


def settings(config: dict) -> dict:
    return {s: Setting(LABELS[s], build(config), fill, cache_read(s), step=step(s),
                       rewind=rewind, shares_layer=None if s == "dense" else "dense",
                       weights=latent_weights if s == "dense" else weight_bytes)
            for s in SETTINGS}


def crossovers(layer) -> dict:
    """Held lengths at which the gathered form reads as many bytes as the dense one: with
    every byte counted (batch 1), and with the cache alone (weights shared by a batch)."""
    row = row_bytes(layer)
    saved_per_token = row - layer.indexer.head_dim * BYTES  # latent row -> indexer key
    fixed = weight_bytes(layer.indexer) + layer.index_topk * row
    return {"total_bytes": fixed / saved_per_token,
            "cache_bytes": layer.index_topk * row / saved_per_token}


def record(config: dict, layers: dict) -> dict:
    layer = layers["dense"]
    return {"crossover": crossovers(layer),
            "weight_bytes": {"latent": latent_weights(layer),
                             "indexer": weight_bytes(layer.indexer)}}


def ratios(report: dict) -> dict:
    """Speed-ups and the goal, from the rows alone."""
    rows = {(r["setting"], r["held"]): r for r in report["results"]}
    held = report["config"]["held"]
    speedup = {str(h): rows["dense", h]["median_s"] / rows["sparse_gathered", h]["median_s"]
               for h in held}
    predicted = report["crossover"]["total_bytes"]
    predicted_from = min((h for h in held if h >= predicted), default=None)
    faster_from = None  # the shortest length from which gathered wins at every longer one
    for h in sorted(held, reverse=True):
        if speedup[str(h)] <= 1:
            break
        faster_from = h
    checked = [h for h in held if predicted_from is not None and h >= predicted_from]
    return {
        "fraction_of_bandwidth": shares_of_bandwidth(report),
        "gathered_speedup_over_dense": speedup,
        "predicted_crossover_held": predicted,
        "predicted_from_held": predicted_from,
        "gathered_faster_from_held": faster_from,
        "goals": {
            "gathered_faster_from_predicted": bool(checked)
            and all(speedup[str(h)] > 1 for h in checked),
        },
    }


def main(argv=None) -> dict:
    report = run_script(argv, doc=__doc__, stem="sparse_decode", full=FULL, quick=QUICK,
                        settings=settings, ratios=ratios, figure="sparse_decode_figure",
                        labels=LABELS, by_length=True, record=record)
    if "crossover" in report and "gathered_faster_from_held" in report.get("ratios", {}):
        r = report["ratios"]
        print(f"bytes predict the gathered form faster from "
              f"{r['predicted_crossover_held']:,.0f} held (cache alone: "
              f"{report['crossover']['cache_bytes']:,.0f}); measured: faster from "
              f"{r['gathered_faster_from_held']} on")
    return report


if __name__ == "__main__":
    main()

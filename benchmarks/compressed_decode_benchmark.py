"""Decoding one token with DeepSeek-V4-Flash's compressed attention against DeepSeek-V3.2's
sparse and dense latent attention, one layer of each, from 4K to 512K tokens held, against
the memory bandwidth of the machine measured in the same run; and where the byte and
multiply-add counts predict each to overtake another, against where the timings separate.

The layers (float32, eval mode, batch 1, one thread), each at its model's published sizes
from the family table, each in the form that decodes fastest here:

- ``mla``: DeepSeek-V3.2's latent attention, dense (``LatentAttention``'s own forward, absorbed,
  every held token attended); ``dsa``: the same layer's sparse form, the indexer's top 2,048
  tokens gathered (``SparseLatentAttention`` as ``sparse_decode_benchmark.py`` builds it:
  model width 7,168, 128 heads, latent 512 + 64, 64 indexer heads of 128);
- ``csa``: a compressed sparse attention layer of DeepSeek-V4-Flash (layer 2 of its
  ``compress_ratios``: model width 4,096, 64 heads sharing one key-value head of 512, a
  window of 128, one entry per 4 tokens, 64 indexer heads of 128 keeping 512 entries,
  ``gathered=True``); ``hca``: its heavily compressed layer (layer 3: one entry per 128
  tokens, every entry attended, the explicit path: the fused kernel's CPU fallback copies the
  one shared key-value head for each of the 64 query heads, measured here 0.76 s a step
  against 0.05 s at 256K held).

Each cache is filled directly with random numbers (what they hold does not change the time):
the latents and rotary keys (``mla``), and the indexer's keys (``dsa``), of ``held`` tokens,
preallocated for one more; for V4, a ``CompressedCache`` holding the window's 127 keys, the
``held // m`` entries (and as many indexer entries, CSA) and the last tokens not yet pooled
(``2m - 1`` in CSA, ``m - 1`` in HCA, as ``compressor.PoolState`` keeps them). After each
call the cache is put back as it was. With ``held`` a multiple of 128 no entry closes in the
timed step (one in ``m`` steps closes one: a gated sum over ``2m`` tokens, small beside the rest).

Bytes a step must read (float32: 4 a number), every weight it uses once and:

- ``mla``: every held row, ``held (512 + 64)`` numbers;
- ``dsa``: every indexer key, ``held x 128``, and the 2,048 chosen rows, ``2,048 x 576``;
- ``csa``: the window's 127 keys of 512, every indexer entry (``held / 4 x 128``), the 512
  chosen entries of 512, and the unpooled tokens' numbers (7 tokens x ``4 x 512`` for the
  entries, 7 x ``4 x 128`` for the indexer's: two series of values and gates each);
- ``hca``: the window, every entry (``held / 128 x 512``) and 127 unpooled tokens x ``2 x 512``.

Multiply-adds of a step: ``compressed_costs.layer_step`` for the V4 layers; for V3.2, its
``v32_costs`` for one layer (``dsa``), and the same with every held row attended and no
indexer (``mla``). Each count is a line in ``held`` beyond 2,048 tokens (where every top-k is
full); where two settings' lines meet is the crossover that count predicts. The run checks it
against the timings: a setting is faster where the medians differ by more than both spreads
(``llm_attention_site.timings``). Goal, for each pair (``csa`` against ``dsa`` and ``mla``,
``dsa`` against ``mla``, ``hca`` against ``csa``): faster at every held length from the first
one where both counts predict it cheaper.

What the counts leave out: a step that closes an entry (one in ``m``) copies the held
entries to add the new one (``compressor.merge_entries``: a join and a gather); the timed
steps close none. When every step copied them (three times), a CSA step at 512K held took
1.3 s in one run here, against 0.19 s without the copies in the next. The profile at the longest length (recorded) shows where a
step's time goes.

Why 4K to 512K: V4's context is 1M tokens, but the dense latent step is bound by its
arithmetic on a CPU core (139K multiply-adds per held token: one call took 1.1 s at 64K and
18 s at 512K here, on a busy machine) and its cache is 1.2 GB at 512K. With every cache of
512K tokens held at once and one step of each run, the process peaked at 7.1 GB; counted from
single calls, the whole run should take four to six minutes on a quiet machine. 1M would
double the dense step and the caches: about 10 GB, and several minutes more. The driver
times one length at a time and frees its caches before filling the next.

The driver writes ``benchmarks/compressed_decode_results.json`` and the figure the page draws
from it, ``benchmarks/compressed_decode_benchmark.svg``; ``--quick`` checks the script in
seconds.
"""

from __future__ import annotations

import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from decode import Setting, run_script, weight_bytes  # noqa: E402
from sparse_decode_benchmark import build as v32_build  # noqa: E402
from sparse_decode_benchmark import latent_weights  # noqa: E402
from sparse_decode_benchmark import sizes as v32_sizes  # noqa: E402

from llm_attention.compressed_attention import CompressedAttention, CompressedCache  # noqa: E402
from llm_attention.compressor import PoolState  # noqa: E402
from llm_attention.hf_config import compressed_attention_options  # noqa: E402
from llm_attention.latent import LatentAttention, LatentCache  # noqa: E402
from llm_attention.sparse_latent import SparseLatentCache  # noqa: E402
from llm_attention_site.benchmark_plots import COMPRESSED_SETTINGS  # noqa: E402
from llm_attention_site.compressed_costs import PUBLISHED_V4, layer_step, v32_costs  # noqa: E402
from llm_attention_site.sparse_costs import DEEPSEEK_V32, per_key  # noqa: E402
from llm_attention_site.timings import FASTER, first_separated, verdict  # noqa: E402

LABELS = {setting: spec[0] for setting, spec in COMPRESSED_SETTINGS.items()}  # the figure's
SETTINGS = tuple(LABELS)
PAIRS = (("dsa", "mla"), ("csa", "mla"), ("csa", "dsa"), ("hca", "csa"))
KINDS = {"csa": "compressed_sparse_attention", "hca": "heavily_compressed_attention"}
FLASH = PUBLISHED_V4["DeepSeek-V4-Flash"][1]
SHRUNK = ("d_in", "d_out", "num_heads", "head_dim", "q_lora_rank", "o_groups", "o_lora_rank",
          "window", "rope_head_dim", "index_n_heads", "index_head_dim")


def v4_options(kind: str, shrink: int, top_k: int | None = None) -> dict:
    """``CompressedAttention``'s options for V4-Flash's first layer of ``kind`` (the
    family table's config), widths divided by ``shrink`` (and HCA's rate: 128 / 8 = 16)."""
    first = next(i for i, rate in enumerate(FLASH["compress_ratios"])
                 if rate and compressed_attention_options(FLASH, i)["layer_type"] == kind)
    options = compressed_attention_options(FLASH, first)
    for name in SHRUNK:
        if options.get(name) is not None:
            options[name] = max(1, options[name] // shrink)
    if kind == KINDS["hca"]:
        options["compress_rate"] //= shrink
    if top_k is not None and kind == KINDS["csa"]:
        options["index_topk"] = top_k
    return {"layer": first, **options}


def sizes(shrink: int, v32_top_k: int, v4_top_k: int | None = None) -> dict:
    return dict(v32_sizes(shrink, v32_top_k),
                v4={s: v4_options(kind, shrink, v4_top_k) for s, kind in KINDS.items()})


FULL = dict(sizes(1, DEEPSEEK_V32[1]["index_topk"]),
            held=[4096 * 2**i for i in range(8)],  # 4K .. 512K
            rounds=3, min_run_time=0.4, bandwidth_mib=1024)
QUICK = dict(sizes(8, 16, 16), held=[128, 256], rounds=1, min_run_time=0.001,
             bandwidth_mib=16)


def number_bytes(layer) -> int:
    return next(layer.parameters()).element_size()


# --- the V3.2 layer: dense and sparse latent attention, one layer, two caches
def fill_latent(layer, held: int) -> LatentCache:
    """``held`` random latents and rotary keys, room for one more."""
    weight = layer.W_kv_down.weight
    cache = LatentCache(1, layer.kv_lora_rank, layer.qk_rope_head_dim, held + 1,
                        dtype=weight.dtype)
    cache.entries[:, :held].normal_()
    cache.length = held
    return cache


def fill_sparse(layer, held: int) -> SparseLatentCache:
    """The same, and ``held`` random indexer keys."""
    weight = layer.W_kv_down.weight
    cache = SparseLatentCache(1, layer.kv_lora_rank, layer.qk_rope_head_dim,
                              layer.indexer.head_dim, held + 1, dtype=weight.dtype)
    cache.latent.entries[:, :held].normal_()
    cache.index_keys[:, :held].normal_()
    cache.latent.length = held
    return cache


def dense_step(layer, x, cache):
    LatentAttention.forward(layer, x, cache=cache)  # every held row, absorbed


def sparse_step(layer, x, cache):
    layer.gathered = True  # the top-k rows copied out, then attended
    layer(x, cache=cache)


def rewind_sparse(cache, held: int) -> None:
    cache.latent.length = held


# --- the V4-Flash layers
class HeldCache(CompressedCache):
    """A ``CompressedCache`` filled directly; ``rewind`` puts back what it was filled with
    (a step replaces the window, the pools and the length, and changes none in place)."""

    def keep(self) -> None:
        self.filled = (self.window, self.pools, self.length)

    def rewind(self) -> None:
        self.window, self.pools, self.length = self.filled


def build_v4(options: dict, gathered: bool):
    kept = {k: v for k, v in options.items() if k != "layer"}
    return lambda context_length: CompressedAttention(
        **{**kept, "context_length": context_length}, fast_path=False, gathered=gathered)


def pool(width: int, count: int, stream: int, stream_width: int, dtype) -> PoolState:
    """``count`` random entries of ``width`` and ``stream`` tokens' numbers."""
    return PoolState(torch.randn(1, count, width, dtype=dtype), torch.tensor([count]),
                     torch.randn(1, stream, stream_width, dtype=dtype))


def fill_v4(layer, held: int) -> HeldCache:
    """The window's last ``W - 1`` keys, ``held // m`` entries (and the indexer's), and the
    stream of tokens a later entry still needs, all random."""
    d, count, dtype = layer.head_dim, held // layer.compress_rate, layer.W_kv.weight.dtype
    cache = HeldCache(1)
    cache.window = torch.randn(1, min(layer.window - 1, held), d, dtype=dtype)  # (1,W-1,d)
    compressor = layer.compressor
    width = 2 * compressor.W_kv.out_features  # c and z: 4d in CSA, 2d in HCA
    cache.pools = {"compressor": pool(d, count, min(compressor.keep, held), width, dtype)}
    if layer.indexer is not None:
        index = layer.indexer.compressor
        cache.pools["indexer"] = pool(index.head_dim, count, min(index.keep, held),
                                      2 * index.W_kv.out_features, dtype)
    cache.length = held
    cache.keep()
    return cache


def rewind_v4(cache: HeldCache, held: int) -> None:
    cache.rewind()


def v4_step(layer, x, cache):
    layer(x[..., :layer.W_kv.in_features], cache=cache)  # the run's token, V4's width


# --- what a step reads and computes
def cache_read(setting: str, layer, held: int) -> int:
    """Bytes of cache a step reads with ``held`` tokens held (see the module's docstring)."""
    n = number_bytes(layer)
    if setting in ("mla", "dsa"):
        row = layer.kv_lora_rank + layer.qk_rope_head_dim  # d_c + d_r
        if setting == "mla":
            return held * row * n
        return (held * layer.indexer.head_dim + min(layer.index_topk, held) * row) * n
    d, m, count = layer.head_dim, layer.compress_rate, held // layer.compress_rate
    window = min(layer.window - 1, held) * d
    compressor = layer.compressor
    stream = min(compressor.keep, held) * 2 * compressor.W_kv.out_features
    if setting == "hca":
        return (window + count * d + stream) * n
    index = layer.indexer.compressor
    stream += min(index.keep, held) * 2 * index.W_kv.out_features
    chosen = min(layer.index_topk, count) * d
    return (window + count * index.head_dim + chosen + stream) * n


def v32_values(config: dict) -> dict:
    """The run's V3.2 sizes under config.json's names, for ``sparse_costs``."""
    names = dict(hidden_size="d_model", num_attention_heads="num_heads",
                 q_lora_rank="q_lora_rank", kv_lora_rank="kv_lora_rank",
                 qk_nope_head_dim="qk_nope_head_dim", qk_rope_head_dim="qk_rope_head_dim",
                 v_head_dim="v_head_dim", index_n_heads="index_n_heads",
                 index_head_dim="index_head_dim", index_topk="index_topk")
    return {theirs: config[ours] for theirs, ours in names.items()} | {
        "num_hidden_layers": 1}


def multiply_adds(setting: str, config: dict, held: int) -> int:
    """Multiply-adds of one step with ``held`` tokens held, as ``compressed_costs``
    counts them."""
    if setting in KINDS:
        return sum(layer_step(config["v4"][setting], held).values())
    values = v32_values(config)
    step = v32_costs(values, held)["step"]  # one layer: the sparse form
    if setting == "dsa":
        return sum(step.values())
    cost = per_key(values)
    return held * cost["absorbed"] + step["projections"] - cost["indexer_per_token"]


def settings(config: dict) -> dict:
    def read(setting: str):
        return lambda layer, cache, held: cache_read(setting, layer, held)

    v32 = v32_build(config)
    return {
        "mla": Setting(LABELS["mla"], v32, fill_latent, read("mla"), step=dense_step,
                       weights=latent_weights),
        "dsa": Setting(LABELS["dsa"], v32, fill_sparse, read("dsa"), step=sparse_step,
                       rewind=rewind_sparse, shares_layer="mla"),
        **{s: Setting(LABELS[s], build_v4(config["v4"][s], s == "csa"), fill_v4, read(s),
                      step=v4_step, rewind=rewind_v4) for s in KINDS},
    }


def record(config: dict, layers: dict) -> dict:
    """Each setting's counts: at the run's lengths, and as lines ``fixed + per_token x
    held`` (exact at multiples of the rates from ``tail_from`` tokens on)."""
    v4 = config["v4"]
    tail_from = max(config["index_topk"], v4["csa"]["compress_rate"] * v4["csa"]["index_topk"],
                    v4["csa"]["window"], v4["hca"]["compress_rate"])
    far = 2**21  # beyond tail_from, a multiple of every rate
    counts = {}
    for s, layer in layers.items():
        weights = latent_weights(layer) if s == "mla" else weight_bytes(layer)

        def at(held: int, s=s, layer=layer, weights=weights) -> dict:
            return {"bytes": weights + cache_read(s, layer, held),
                    "multiply_adds": multiply_adds(s, config, held)}

        near, further = at(far), at(2 * far)
        counts[s] = {"at_held": {str(h): at(h) for h in config["held"]}, "lines": {
            key: {"per_token": (further[key] - near[key]) / far,
                  "fixed": 2 * near[key] - further[key]} for key in near}}
    return {"counts": counts, "tail_from": tail_from}


def cheaper_from(cost_a: dict, cost_b: dict):
    """The first length (keys, in increasing order) from which ``cost_a`` stays below
    ``cost_b``; None if it is not below at the last."""
    first = None
    for h in sorted(cost_a, key=int):
        if cost_a[h] >= cost_b[h]:
            first = None
        elif first is None:
            first = int(h)
    return first


def meeting(line_a: dict, line_b: dict):
    """Tokens where two lines meet (None if parallel)."""
    slope = line_b["per_token"] - line_a["per_token"]
    return None if slope == 0 else (line_a["fixed"] - line_b["fixed"]) / slope


def ratios(report: dict) -> dict:
    rows = {(r["setting"], r["held"]): r for r in report["results"]}
    held, counts = report["config"]["held"], report["counts"]
    crossings, goals = {}, {}
    for a, b in PAIRS:
        pairs = {h: (rows[a, h], rows[b, h]) for h in held}
        entry = {"speedup": {str(h): rows[b, h]["median_s"] / rows[a, h]["median_s"]
                             for h in held},
                 "verdicts": {str(h): verdict(*pairs[h]) for h in held},
                 "measured_faster_from_held": first_separated(pairs, FASTER)}
        for key in ("bytes", "multiply_adds"):
            line_a, line_b = counts[a]["lines"][key], counts[b]["lines"][key]
            entry[key] = {
                "lines_meet_at": meeting(line_a, line_b),
                "a_grows_slower": line_a["per_token"] < line_b["per_token"],
                "predicted_from_held": cheaper_from(
                    {h: c[key] for h, c in counts[a]["at_held"].items()},
                    {h: c[key] for h, c in counts[b]["at_held"].items()}),
            }
        predicted = [entry[key]["predicted_from_held"] for key in ("bytes", "multiply_adds")]
        if None not in predicted:  # both counts predict it: faster from there on
            entry["both_predict_from_held"] = start = max(predicted)
            goals[f"{a}_faster_than_{b}_where_both_counts_predict"] = all(
                verdict(*pairs[h]) == FASTER for h in held if h >= start)
        crossings[f"{a}_vs_{b}"] = entry
    return {"crossings": crossings, "goals": goals}


def predicted(count: dict) -> str:
    """Where one count predicts the first setting of a pair to be the cheaper."""
    meet, grid = count["lines_meet_at"], count["predicted_from_held"]
    if meet is None:
        where = "parallel lines"
    elif count["a_grows_slower"]:
        where = "cheaper at every length" if meet <= 0 else f"lines meet at {meet:,.0f}"
    else:
        where = f"dearer beyond {meet:,.0f}"
    return f"from {grid} held ({where})"


def show(report: dict) -> None:
    for name, c in report["ratios"]["crossings"].items():
        a, b = name.split("_vs_")
        print(f"{a} against {b}: bytes predict {a} cheaper {predicted(c['bytes'])}, "
              f"multiply-adds {predicted(c['multiply_adds'])}; measured: faster from "
              f"{c['measured_faster_from_held']}")


def main(argv=None) -> dict:
    report = run_script(
        argv, doc=__doc__, stem="compressed_decode", full=FULL, quick=QUICK,
        settings=settings, ratios=ratios, figure="compressed_decode_figure", labels=LABELS,
        by_length=True, record=record,
        width=lambda config: max(config["d_model"], config["v4"]["csa"]["d_in"]))
    if "crossings" in report.get("ratios", {}):
        show(report)
    return report


if __name__ == "__main__":
    main()

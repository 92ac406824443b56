# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Notebook: Modern attention
#
# The code of the "Modern attention" pages, cell by cell: grouped-query heads, rotary
# positions, a sliding window with its rolling cache, and the module that combines them,
#
# $$\mathrm{head}_h = \mathrm{softmax}\left(
#   \frac{R_m q_h \cdot R_n k_{\lfloor h/G \rfloor}}{\sqrt{d_h}} + M\right)
#   V_{\lfloor h/G \rfloor} ,$$
#
# then latent attention, which caches one small vector per token instead, and last linear
# attention (Gated DeltaNet), which keeps a state of fixed size.
#
# It needs `torch` and `matplotlib`; its first code cell fetches the package from the site
# when it is not installed.

# %%
# Downloaded from the site? Then this cell saves the site's fetch_packages.py beside the
# notebook and runs it: it fetches the package's modules from the site, once, into
# ./llm_attention/, and the site's figure helpers into ./llm_attention_site/. With the
# packages installed (the repository's set-up), it does nothing.
import importlib.util
import runpy
import urllib.request

SITE_URL = "http://127.0.0.1:8000/"  # the build writes the site's address here
if importlib.util.find_spec("llm_attention_site") is None:
    fetcher = urllib.request.urlretrieve(f"{SITE_URL}code/llm_attention_site/fetch_packages.py",
                                         "fetch_packages.py")[0]
    runpy.run_path(fetcher, {"SITE_URL": SITE_URL}, run_name="__main__")

# %%
import torch

from llm_attention_site.figures import heatmap, shown
from llm_attention.grouped_query import GroupedQueryAttention
from llm_attention.kv_cache import KVCache
from llm_attention.modern import ModernAttention
from llm_attention.multihead import MultiHeadAttention
from llm_attention.rope import RotaryEmbedding
from llm_attention.sliding_window import sliding_window_mask

# %% [markdown]
# ## Grouped-query attention
#
# With as many key/value heads as query heads, it is multi-head attention: load the same
# weights and compare.

# %%
torch.manual_seed(0)
mha = MultiHeadAttention(32, 32, 16, 0.0, num_heads=8)
gqa = GroupedQueryAttention(32, 32, 16, 0.0, num_heads=8,
                            num_kv_heads=8)
gqa.load_state_dict(mha.state_dict())
x = torch.randn(2, 10, 32)  # (B, T, d_in)
difference = (gqa(x) - mha(x)).abs().max().item()
print(f"largest difference: {difference:.1e}")
assert difference < 1e-6

# %% [markdown]
# Fewer key/value heads, a smaller cache: fill one cache per setting and weigh it.

# %%
sizes = {}
for kv_heads in (8, 2, 1):
    layer = GroupedQueryAttention(32, 32, 64, 0.0, num_heads=8,
                                  num_kv_heads=kv_heads)
    cache = KVCache(1, kv_heads, layer.head_dim, context_length=64)
    layer(torch.randn(1, 64, 32), cache=cache)
    sizes[kv_heads] = cache.nbytes
    print(f"num_kv_heads={kv_heads}: {cache.nbytes:,} bytes")
assert sizes[8] == 4 * sizes[2] == 8 * sizes[1]

# %% [markdown]
# ## Rotary positions
#
# Put one query and one key at every pair of positions: the score is the same along each
# diagonal, because it depends only on the distance.

# %%
rope = RotaryEmbedding(head_dim=8, context_length=32)
q_vec, k_vec = torch.randn(8), torch.randn(8)
queries = rope(q_vec.expand(1, 1, 10, 8))  # (1, 1, T, d_h)
keys = rope(k_vec.expand(1, 1, 10, 8))  # (1, 1, T, d_h)
scores = (queries @ keys.transpose(-2, -1))[0, 0]  # (T, T)
for d in range(-9, 10):
    diagonal = scores.diagonal(d)
    same = diagonal[0].expand(len(diagonal))
    assert torch.allclose(diagonal, same, atol=1e-5)
shown(heatmap(scores, title="Score by query and key position", annotate=False,
              cmap="RdBu", xlabel="key position", ylabel="query position"),
      alt="10 by 10 scores, constant along each diagonal")

# %% [markdown]
# ## A sliding window
#
# Each token attends to itself and the two before it.

# %%
may_attend = (~sliding_window_mask(8, 3)).float()  # (T, T): 1 = may
shown(heatmap(may_attend, title="Sliding-window mask, window = 3",
              fmt="{:.0f}", legend=("hidden", "may attend")),
      alt="8 by 8 mask: a band three cells wide on and below the diagonal")

# %% [markdown]
# The rolling cache stops growing at the window, with the outputs of a full one.

# %%
torch.manual_seed(1)
layer = ModernAttention(16, 16, 40, 0.0, num_heads=2, num_kv_heads=1,
                        window=8)
rolling, full = layer.make_cache(1), KVCache(1, 1, layer.head_dim, 40)
x = torch.randn(1, 40, 16)
for t in range(40):
    a = layer(x[:, t : t + 1], cache=rolling)
    b = layer(x[:, t : t + 1], cache=full)
    assert torch.allclose(a, b, atol=1e-6)
print(f"after 40 tokens: rolling cache {rolling.nbytes} bytes, "
      f"full cache {full.length * 2 * layer.head_dim * 4} bytes in use")
assert rolling.held == 8

# %% [markdown]
# ## The combined module
#
# Qwen3-style: grouped-query heads, rotary positions and QK-norm. Decoding with a cache
# gives the outputs of one pass over the whole sequence.

# %%
torch.manual_seed(2)
layer = ModernAttention(64, 64, 32, 0.0, num_heads=4, num_kv_heads=1,
                        head_dim=32, qk_norm=True, fast_path=True)
x = torch.randn(2, 12, 64)
whole = layer(x)
cache = layer.make_cache(2)
steps = [layer(x[:, :8], cache=cache)]
steps += [layer(x[:, t : t + 1], cache=cache) for t in range(8, 12)]
difference = (torch.cat(steps, dim=1) - whole).abs().max().item()
print(f"cached decoding vs one pass: {difference:.1e}")
assert difference < 1e-5

# %% [markdown]
# ## Latent attention
#
# DeepSeek-V3's layer caches one latent of `kv_lora_rank` numbers and one shared rotary key
# per token. Decoding the absorbed way (queries moved into latent space) gives the plain
# way's outputs while reading only that cache.

# %%
from llm_attention.latent import LatentAttention

torch.manual_seed(3)
latent_layer = LatentAttention(64, 64, 32, 0.0, 8, kv_lora_rank=32, qk_nope_head_dim=16,
                               qk_rope_head_dim=8, v_head_dim=16, q_lora_rank=24).eval()
x = torch.randn(2, 12, 64)
with torch.no_grad():
    plain_out = latent_layer(x)
    latent_layer.absorb = True
    latent_cache = latent_layer.make_cache(2)
    steps = [latent_layer(x[:, :8], cache=latent_cache)]
    steps += [latent_layer(x[:, t : t + 1], cache=latent_cache) for t in range(8, 12)]
absorbed_gap = (torch.cat(steps, dim=1) - plain_out).abs().max().item()
print(f"absorbed, cached vs plain, one pass: {absorbed_gap:.1e}")
print(f"cache: {latent_cache.entries.shape[-1]} numbers per token, "
      f"{latent_cache.nbytes} bytes for {latent_cache.context_length} tokens")
assert absorbed_gap < 1e-5

# %% [markdown]
# ## Sparse attention
#
# DeepSeek-V3.2 puts a lightning indexer in front of latent attention: a few small ReLU heads
# score every earlier token, each query keeps the `index_topk` best, and attention runs over
# those. The masked form (every key, the others hidden) and the gathered form (only the
# chosen cache rows) give the same outputs; dense attention over every token does not.

# %%
from llm_attention.sparse_latent import SparseLatentAttention

torch.manual_seed(4)
sparse_layer = SparseLatentAttention(
    64, 64, 32, 0.0, 8, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8,
    v_head_dim=16, q_lora_rank=24, index_n_heads=4, index_head_dim=16, index_topk=4,
).eval()
with torch.no_grad():
    masked_out = sparse_layer(x)
    sparse_layer.gathered = True
    sparse_cache = sparse_layer.make_cache(2)  # latents and indexer keys
    steps = [sparse_layer(x[:, :8], cache=sparse_cache)]
    steps += [sparse_layer(x[:, t : t + 1], cache=sparse_cache) for t in range(8, 12)]
    dense_out = LatentAttention.forward(sparse_layer, x)  # every earlier token
gathered_gap = (torch.cat(steps, dim=1) - masked_out).abs().max().item()
dense_gap = (dense_out - masked_out).abs().max().item()
print(f"gathered, cached vs masked, one pass: {gathered_gap:.1e}")
print(f"dense latent attention vs sparse: {dense_gap:.2f}")
assert gathered_gap < 1e-5 and dense_gap > 0.01

# %% [markdown]
# ## Linear attention
#
# Gated DeltaNet (three layers of four in Qwen3-Next and Qwen3.5) keeps one matrix per
# head instead of a cache: each token decays it and writes only what it is missing. The
# chunked form gives the token-by-token recurrence's outputs; decoding with the state
# cache gives one pass's outputs, and the cache keeps the same bytes however many tokens
# it has read.

# %%
from llm_attention.linear_attention import GatedDeltaNet

torch.manual_seed(4)
linear_layer = GatedDeltaNet(64, 64, 4, num_key_heads=2, key_head_dim=16,
                             value_head_dim=16, chunk_size=8).eval()
x = torch.randn(2, 30, 64)
with torch.no_grad():
    chunked_out = linear_layer(x)
    linear_layer.form = "recurrent"
    recurrent_out = linear_layer(x)
    linear_layer.form = "chunked"
    state_cache = linear_layer.make_cache(2)
    steps = [linear_layer(x[:, :20], cache=state_cache)]
    empty_bytes = linear_layer.make_cache(2).nbytes
    steps += [linear_layer(x[:, t : t + 1], cache=state_cache) for t in range(20, 30)]
forms_gap = (chunked_out - recurrent_out).abs().max().item()
decode_gap = (torch.cat(steps, dim=1) - chunked_out).abs().max().item()
print(f"chunked vs recurrent: {forms_gap:.1e}; cached decoding vs one pass: {decode_gap:.1e}")
print(f"state cache: {state_cache.nbytes} bytes after {state_cache.length} tokens, "
      f"{empty_bytes} empty")
assert forms_gap < 1e-5 and decode_gap < 1e-5 and state_cache.nbytes == empty_bytes

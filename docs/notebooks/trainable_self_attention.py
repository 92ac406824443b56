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
# # Notebook: Self-attention with trainable weights, cell by cell
#
# The companion of chapter 3. Three trainable matrices turn each token into a query, a key
# and a value:
#
# $$Z = \mathrm{softmax}_\text{row}\!\left(\frac{(X W_q)(X W_k)^\top}{\sqrt{d_k}}\right) X W_v$$
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
import matplotlib.pyplot as plt
import torch

from llm_attention_site.figures import heatmap, shown
from llm_attention.self_attention import SelfAttentionV1, SelfAttentionV2
from llm_attention.toy import TOKENS, toy_embeddings

inputs = toy_embeddings()  # (6, 3)
d_in, d_out = 3, 2

# %% [markdown]
# ## One query, step by step (the book's seed)

# %%
torch.manual_seed(123)
W_query = torch.rand(d_in, d_out)  # (3, 2)
W_key = torch.rand(d_in, d_out)  # (3, 2)
W_value = torch.rand(d_in, d_out)  # (3, 2)

query_2 = inputs[1] @ W_query  # (2,)
keys = inputs @ W_key  # (6, 2)
values = inputs @ W_value  # (6, 2)
attn_scores_2 = query_2 @ keys.T  # (6,)
d_k = keys.shape[-1]
attn_weights_2 = torch.softmax(attn_scores_2 / d_k**0.5, dim=-1)  # (6,)
context_vec_2 = attn_weights_2 @ values  # (2,)

book_scores = torch.tensor([1.2705, 1.8524, 1.8111, 1.0795, 0.5577, 1.544])
assert torch.allclose(query_2, torch.tensor([0.4306, 1.4551]), atol=1e-4)
assert torch.allclose(attn_scores_2, book_scores, atol=1e-4)
assert torch.allclose(context_vec_2, torch.tensor([0.3061, 0.8210]), atol=1e-4)
print("query_2:      ", query_2)
print("attn_scores_2:", attn_scores_2)
print("context_vec_2:", context_vec_2)

# %% [markdown]
# ## Why divide by $\sqrt{d_k}$
#
# Random queries and keys with unit-variance entries give scores of size $\sqrt{d_k}$.
# Without the division, softmax saturates as $d_k$ grows and the gradient through it fades.

# %%
def saturation(d_k, scaled, n=1_000, tokens=6):
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(n, d_k, generator=generator)  # (n, d_k)
    k = torch.randn(n, tokens, d_k, generator=generator)  # (n, tokens, d_k)
    upstream = torch.randn(n, tokens, generator=generator)  # (n, tokens)
    scores = torch.einsum("nd,ntd->nt", q, k)  # (n, tokens)
    if scaled:
        scores = scores / d_k**0.5
    scores.requires_grad_(True)
    weights = torch.softmax(scores, dim=-1)  # (n, tokens)
    (weights * upstream).sum().backward()
    return weights.max(dim=-1).values.mean().item(), scores.grad.norm(dim=-1).mean().item()


dims = [2, 8, 32, 128, 512, 2048]
fig, (left, right) = plt.subplots(2, 1, figsize=(3.4, 5.6))  # stacked: a phone's width
for scaled, style in ((False, "o-"), (True, "s-")):
    rows = [saturation(d, scaled) for d in dims]
    label = "scores / √$d_k$" if scaled else "scores / 1"
    left.plot(dims, [r[0] for r in rows], style, label=label)
    right.plot(dims, [r[1] for r in rows], style, label=label)
    if not scaled:
        assert rows[-1][0] > 0.95 and rows[-1][1] < rows[0][1] / 10
for axis, title in ((left, "mean largest weight"), (right, "mean gradient norm")):
    axis.set_xscale("log", base=2)
    axis.set_xticks(dims, labels=[f"{d:,}" for d in dims])
    axis.minorticks_off()
    axis.set_xlabel("$d_k$")
    axis.set_title(title)
left.legend()
fig.tight_layout()
shown(fig, alt="The mean largest weight and the mean gradient norm against d_k, "
      "unscaled and scaled")

# %% [markdown]
# ## The two classes

# %%
torch.manual_seed(123)
sa_v1 = SelfAttentionV1(d_in, d_out)
torch.manual_seed(789)
sa_v2 = SelfAttentionV2(d_in, d_out)
first_v1, first_v2 = sa_v1(inputs)[0], sa_v2(inputs)[0]  # (2,) each
assert torch.allclose(first_v1, torch.tensor([0.2996, 0.8053]), atol=1e-4)
assert torch.allclose(first_v2, torch.tensor([-0.0739, 0.0713]), atol=1e-4)
print(sa_v1(inputs).detach())
print(sa_v2(inputs).detach())

# %% [markdown]
# ## Exercise 3.1: carry V2's weights into V1
#
# `nn.Linear` stores its weight as `(d_out, d_in)`, so V1 gets the transpose.

# %%
with torch.no_grad():
    sa_v1.W_query.copy_(sa_v2.W_query.weight.T)
    sa_v1.W_key.copy_(sa_v2.W_key.weight.T)
    sa_v1.W_value.copy_(sa_v2.W_value.weight.T)
assert torch.allclose(sa_v1(inputs), sa_v2(inputs))
print(sa_v1(inputs).detach())

# %% [markdown]
# ## What the untrained V2 attends to

# %%
with torch.no_grad():
    queries, keys = sa_v2.W_query(inputs), sa_v2.W_key(inputs)  # (6, 2) each
    scores = queries @ keys.T / keys.shape[-1] ** 0.5  # (6, 6)
    attn_weights = torch.softmax(scores, dim=-1)  # (6, 6)
    values = sa_v2.W_value(inputs)  # (6, 2)
    assert torch.allclose(attn_weights @ values, sa_v2(inputs))
shown(heatmap(attn_weights, TOKENS, TOKENS, title="SelfAttentionV2, untrained"),
      alt="6 by 6 heatmap of the weights of an untrained SelfAttentionV2")

# %% [markdown]
# ## Try it
#
# - Build `SelfAttentionV2(3, 2, qkv_bias=True)` and list its parameters.
# - Train `sa_v2` for a few steps so that "journey" attends mostly to "step", and watch the
#   heatmap change.

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
# # Notebook: Causal attention
#
# The code of the chapter "Causal attention" (chapter 4 of the site), cell by cell.
# A token may attend to itself and to the tokens before it, never to the ones after:
#
# $$\mathrm{attn\_weights} = \mathrm{softmax}\left(\frac{Q K^\top}{\sqrt{d_k}} + M\right),
# \qquad M_{ij} = -\infty \text{ for } j > i, \; 0 \text{ otherwise}$$
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
from torch import nn

from llm_attention.causal import CausalAttention
from llm_attention_site.figures import heatmap, shown
from llm_attention.self_attention import SelfAttentionV2
from llm_attention.toy import TOKENS, toy_embeddings

inputs = toy_embeddings()  # (6, 3)
torch.manual_seed(789)  # the book's seed for this step
sa_v2 = SelfAttentionV2(d_in=3, d_out=2)
with torch.no_grad():
    queries = sa_v2.W_query(inputs)  # (6, 2)
    keys = sa_v2.W_key(inputs)  # (6, 2)
    values = sa_v2.W_value(inputs)  # (6, 2)
attn_scores = queries @ keys.T  # (6, 6)
d_k = keys.shape[-1]
print(torch.softmax(attn_scores / d_k**0.5, dim=-1))

# %% [markdown]
# ## Mask after the softmax, then renormalise
#
# Zero the weights above the diagonal and divide each row by what is left.

# %%
T = attn_scores.shape[0]
weights = torch.softmax(attn_scores / d_k**0.5, dim=-1)  # (6, 6)
kept = weights * torch.tril(torch.ones(T, T))  # (6, 6)
renormalised = kept / kept.sum(dim=-1, keepdim=True)  # (6, 6)
print(renormalised)

# %% [markdown]
# Nothing leaks from the future: each row equals a softmax over the allowed scores alone.

# %%
for i in range(T):
    past = attn_scores[i, : i + 1]  # (i + 1,): the past and itself
    alone = torch.softmax(past / d_k**0.5, dim=-1)  # (i + 1,)
    assert torch.allclose(alone, renormalised[i, : i + 1], atol=1e-6)
print("every row matches a softmax over its past")

# %% [markdown]
# ## Mask with −∞ before the softmax
#
# The same weights in one pass.

# %%
future = torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)  # (6, 6)
masked = attn_scores.masked_fill(future, -torch.inf)  # (6, 6)
attn_weights = torch.softmax(masked / d_k**0.5, dim=-1)  # (6, 6)
assert torch.allclose(attn_weights, renormalised, atol=1e-6)
shown(heatmap(attn_weights, TOKENS, TOKENS, title="Causal weights"),
      alt="6 by 6 heatmap of the causal weights: zero above the diagonal")

# %% [markdown]
# ## Dropout
#
# In training, each weight is zeroed with probability $p$ and the rest are scaled by $1/(1-p)$.
# Your pattern may differ from the book's: it depends on the machine's random generator.

# %%
torch.manual_seed(123)
dropout = nn.Dropout(0.5)
dropped = dropout(attn_weights)  # (6, 6)
print(dropped)
shown(heatmap(dropped, TOKENS, TOKENS, title="After dropout ($p$ = 0.5)"),
      alt="6 by 6 heatmap of the weights after dropout: about half are zero")

# %% [markdown]
# ## The class, on a batch of two copies
#
# With the book's seed 123 the first token's context vector is the book's `[-0.4519, 0.2216]`.

# %%
batch = torch.stack((inputs, inputs), dim=0)  # (2, 6, 3)
torch.manual_seed(123)
ca = CausalAttention(d_in=3, d_out=2, context_length=6, dropout=0.0)
with torch.no_grad():
    context_vecs = ca(batch)  # (2, 6, 2)
book = torch.tensor([-0.4519, 0.2216])
assert torch.allclose(context_vecs[0, 0], book, atol=1e-4)
print(context_vecs)

# %% [markdown]
# Try it: change a later token of `batch` and check that the earlier rows of the output stay the same.

# %%
changed = batch.clone()
changed[:, 4] += 1.0  # the token "one"
with torch.no_grad():
    after = ca(changed)  # (2, 6, 2)
unchanged = torch.allclose(after[:, :4], context_vecs[:, :4])
assert unchanged
print("rows 0-3 unchanged:", unchanged)

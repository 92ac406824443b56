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
# # Notebook: A simple self-attention, cell by cell
#
# The companion of chapter 2. Six tokens, "Your journey starts with one step", each a
# vector of three numbers. Every token gets a context vector in three steps, with no
# trainable weights:
#
# $$\omega_{ij} = x^{(i)} \cdot x^{(j)} \qquad \alpha_{ij} = \mathrm{softmax}_j(\omega_{ij}) \qquad z^{(i)} = \sum_j \alpha_{ij}\, x^{(j)}$$
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
import math

import torch

from llm_attention_site.figures import heatmap, shown
from llm_attention.simple import (
    attention_scores,
    attention_weights,
    simple_self_attention,
)
from llm_attention.toy import TOKENS, toy_embeddings

inputs = toy_embeddings()  # (6, 3)
print(inputs)

# %% [markdown]
# ## Step 1: the scores of "journey"
#
# One dot product per token, first in a loop, then as one vector-matrix product.

# %%
query = inputs[1]  # (3,): "journey"
attn_scores_2 = torch.empty(len(inputs))  # (6,)
for j, x_j in enumerate(inputs):
    attn_scores_2[j] = torch.dot(query, x_j)

assert torch.allclose(attn_scores_2, query @ inputs.T)
book = torch.tensor([0.9544, 1.495, 1.4754, 0.8434, 0.707, 1.0865])  # the book's scores
assert torch.allclose(attn_scores_2, book, atol=1e-4)
print(attn_scores_2)

# %% [markdown]
# ## Step 2: softmax, and why the naive one breaks
#
# $\exp(s)$ overflows a 32-bit float once $s$ passes about 88.7. Subtracting the largest
# score first changes nothing in exact arithmetic and avoids the overflow.

# %%
def softmax_naive(scores):
    return scores.exp() / scores.exp().sum(dim=0)


def softmax_stable(scores):
    shifted = scores - scores.max()  # every entry <= 0
    return shifted.exp() / shifted.exp().sum(dim=0)


assert 88.7 < math.log(torch.finfo(torch.float32).max) < 88.8  # where exp() overflows

big = 100 * attn_scores_2  # (6,)
print("naive:")
print(softmax_naive(big))
print("stable:")
print(softmax_stable(big))
assert torch.isnan(softmax_naive(big)).any()
assert torch.allclose(softmax_stable(big), torch.softmax(big, dim=0))

attn_weights_2 = torch.softmax(attn_scores_2, dim=-1)  # (6,)
print("weights of journey:", attn_weights_2)

# %% [markdown]
# ## Step 3: the context vector of "journey"

# %%
context_vec_2 = attn_weights_2 @ inputs  # (6,) @ (6, 3) -> (3,)
book = torch.tensor([0.4419, 0.6515, 0.5683])  # the book's context vector
assert torch.allclose(context_vec_2, book, atol=1e-4)
print(context_vec_2)

# %% [markdown]
# ## All six tokens at once
#
# $\Omega = X X^\top$, $A = \mathrm{softmax}_\text{row}(\Omega)$, $Z = A X$, with the
# functions of `llm_attention.simple`.

# %%
attn_weights = attention_weights(inputs)  # (6, 6)
all_context_vecs = simple_self_attention(inputs)  # (6, 3)
assert torch.allclose(attention_scores(inputs)[1], attn_scores_2)
assert torch.allclose(attn_weights.sum(dim=-1), torch.ones(6))
assert torch.allclose(all_context_vecs[1], context_vec_2)
print(all_context_vecs)

# %%
shown(heatmap(attn_weights, TOKENS, TOKENS, title=r"softmax($X X$ᵀ)"),
      alt="6 by 6 heatmap of the attention weights")

# %% [markdown]
# ## Try it
#
# - Multiply `inputs` by 10 and draw the weights again: the rows turn almost one-hot.
# - Change the embedding of "step" and see which tokens it now attends to.

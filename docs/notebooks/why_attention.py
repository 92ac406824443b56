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
# # Notebook: Why attention: what one hidden state forgets
#
# Chapter 1's experiment, to run and vary. A small recurrent network (random weights, never
# trained) reads a sequence one token at a time and keeps a hidden state of a few numbers.
# Self-attention instead computes each output from every input directly:
#
# $$\text{context}_t = \sum_{j} \mathrm{softmax}_j\left(x_t \cdot x_j\right) x_j$$
#
# We change only the first token and measure how much each one's final output moves.
# It needs `torch` and `matplotlib`: its first code cell fetches the package from the site
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
from torch import nn

from llm_attention.simple import simple_self_attention
from llm_attention_site.figures import plain_log_labels, shown

torch.manual_seed(123)
rnn = nn.RNN(input_size=3, hidden_size=4, batch_first=True)

generator = torch.Generator().manual_seed(0)
sequence = torch.rand(100, 3, generator=generator)  # (100, 3): random 3-number tokens
new_first = torch.rand(3, generator=generator)  # (3,): a different first token


def first_token_effect(length):
    """How far the RNN's final state and attention's last output move when only token 0 changes."""
    x = sequence[:length]  # (T, 3)
    y = x.clone()
    y[0] = new_first
    with torch.no_grad():
        _, state_x = rnn(x.unsqueeze(0))  # (1, 1, 4)
        _, state_y = rnn(y.unsqueeze(0))  # (1, 1, 4)
    last_x = simple_self_attention(x)[-1]  # (3,)
    last_y = simple_self_attention(y)[-1]  # (3,)
    return (state_x - state_y).abs().max().item(), (last_x - last_y).abs().max().item()


lengths = [2, 4, 6, 12, 25, 50, 100]
effects = {length: first_token_effect(length) for length in lengths}
for length, (rnn_change, attention_change) in effects.items():
    print(f"{length:>4} tokens   RNN {rnn_change:9.2e}   attention {attention_change:9.2e}")
assert effects[50][0] < 1e-6 < effects[50][1]

# %% [markdown]
# On a log scale the RNN's memory of the first token falls off a cliff (a change of exactly 0
# means it fell below what float32 can resolve; the plot draws those at 1e-12). Attention's
# shrinks only because the first token shares the weights with more and more tokens.

# %%
fig, ax = plt.subplots(figsize=(3.4, 3.0))  # a phone's column: no smaller text
ax.semilogy(lengths, [max(e[0], 1e-12) for e in effects.values()], "o-", label="RNN final state")
ax.semilogy(lengths, [e[1] for e in effects.values()], "s-", label="attention, last token")
ax.set_xlabel("tokens in the sequence")
ax.set_ylabel("change after\nediting token 0")
plain_log_labels(ax.yaxis)
ax.legend()
fig.tight_layout()
shown(fig, alt="On a log scale, the RNN's change falls off a cliff; attention's shrinks slowly")

# %% [markdown]
# Try a larger `hidden_size`, or `nn.GRU` / `nn.LSTM` in place of `nn.RNN`: trained gated networks
# hold on longer, but every early word still has to pass through the same chain of updates.

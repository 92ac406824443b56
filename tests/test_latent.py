"""LatentAttention on its own: absorbed decoding equals the plain way, the cache holds what the
formula says, cached generation equals uncached, a reset cache forgets the padding it held,
DeepSeek-V3's published config builds, and bad input is refused by name."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from llm_attention.latent import (
    LatentAttention,
    LatentCache,
    deinterleave,
    from_hf_state_dict,
    latent_cache_bytes,
)
from llm_attention_site.families import DEEPSEEK_V3
from tests.decode_checks import (
    assert_masks_only_with_padding, one_pass_last, sdpa_masks, step_after_prompt,
)

SMALL = dict(kv_lora_rank=12, qk_nope_head_dim=6, qk_rope_head_dim=4, v_head_dim=5)
PATHS = [(absorb, fast) for absorb in (False, True) for fast in (False, True)]


def small(q_lora_rank=10, **options):
    torch.manual_seed(0)
    layer = LatentAttention(16, 16, 32, 0.0, 4, q_lora_rank=q_lora_rank, bias=True,
                            **{**SMALL, **options}).eval()
    with torch.no_grad():  # norms away from 1, so that a missing norm shows
        layer.latent_norm.weight.uniform_(0.5, 1.5)
    return layer


@pytest.mark.parametrize("q_lora_rank", [10, None])
def test_absorbed_equals_plain(q_lora_rank):
    """Prefill with padding and decoding one token at a time, on both kernels."""
    layer = small(q_lora_rank)
    x = torch.randn(2, 9, 16, generator=torch.Generator().manual_seed(1))
    padding = torch.ones(2, 9, dtype=torch.bool)
    padding[1, :3] = False
    outputs = {}
    for absorb, fast in PATHS:
        layer.absorb, layer.fast_path = absorb, fast
        with torch.no_grad():
            cache = layer.make_cache(2)
            steps = [layer(x[:, :5], padding[:, :5], cache=cache)]
            steps += [layer(x[:, t : t + 1], cache=cache) for t in range(5, 9)]
            outputs[absorb, fast] = (layer(x, padding), torch.cat(steps, dim=1))
    plain = outputs[False, False]
    for path, (prefill, decoded) in outputs.items():
        torch.testing.assert_close(prefill[padding], plain[0][padding], atol=1e-5, rtol=1e-5,
                                   msg=lambda m: f"{path} prefill: {m}")
        torch.testing.assert_close(decoded[padding], plain[0][padding], atol=1e-5, rtol=1e-5,
                                   msg=lambda m: f"{path} cached: {m}")


def test_absorbed_gradients_equal_plain_ones():
    layer = small()
    x = torch.randn(2, 6, 16, generator=torch.Generator().manual_seed(2))
    grads = []
    for absorb in (False, True):
        layer.zero_grad()
        layer.absorb = absorb
        layer(x).square().sum().backward()
        grads.append({n: p.grad.clone() for n, p in layer.named_parameters()})
    for name in grads[0]:
        torch.testing.assert_close(grads[1][name], grads[0][name], atol=1e-5, rtol=1e-4,
                                   msg=lambda m: f"{name}: {m}")


class TinyLatentDecoder(nn.Module):
    """Embeddings, two latent attention blocks with residuals, a head: enough to generate."""

    def __init__(self, vocab=40, width=16, context=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, width)
        self.norms = nn.ModuleList(nn.RMSNorm(width) for _ in range(2))
        self.layers = nn.ModuleList(
            LatentAttention(width, width, context, 0.0, 4, q_lora_rank=8, **SMALL) for _ in range(2)
        )
        self.head = nn.Linear(width, vocab, bias=False)

    def forward(self, tokens, caches=None):
        x = self.emb(tokens)
        for i, (norm, layer) in enumerate(zip(self.norms, self.layers)):
            x = x + layer(norm(x), cache=None if caches is None else caches[i])
        return self.head(x)


@pytest.mark.parametrize("absorb", [False, True], ids=["plain", "absorbed"])
def test_cached_generation_equals_uncached(absorb):
    """Greedy decoding of 20 tokens: the same tokens, logits within 1e-4."""
    torch.manual_seed(0)
    model = TinyLatentDecoder().eval()
    for layer in model.layers:
        layer.absorb = absorb
    prompt = torch.randint(0, 40, (2, 5), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        uncached, uncached_logits = prompt, []
        for _ in range(20):
            logits = model(uncached)[:, -1]
            uncached_logits.append(logits)
            uncached = torch.cat([uncached, logits.argmax(-1, keepdim=True)], dim=1)
        caches = [layer.make_cache(2) for layer in model.layers]
        cached, new, cached_logits = prompt, prompt, []
        for _ in range(20):
            logits = model(new, caches)[:, -1]
            cached_logits.append(logits)
            new = logits.argmax(-1, keepdim=True)
            cached = torch.cat([cached, new], dim=1)
    assert torch.equal(cached, uncached)
    assert len(set(cached[0, 5:].tolist())) > 1  # it does not repeat one token
    torch.testing.assert_close(torch.stack(cached_logits), torch.stack(uncached_logits),
                               atol=1e-4, rtol=0)
    assert caches[0].length == 5 + 19  # the last token is chosen, never fed


@pytest.mark.parametrize("fast_path", [False, True], ids=["explicit", "fast"])
@pytest.mark.parametrize("padded", [False, True], ids=["no-padding", "left-padded"])
def test_an_absorbed_decoding_step_copies_no_cache_and_masks_only_padding(
        fast_path, padded, monkeypatch):
    """One new token after a prompt of 40, absorbed: no call allocates or writes as much as
    the latents held (the heads are folded into query rows; the fused kernel gets keys and
    values of one width, where the general one would copy the keys to scale them), no
    number is read back to Python, and a mask is built only when the prompt had padding."""
    layer = LatentAttention(64, 64, 64, 0.0, 4, kv_lora_rank=32, qk_nope_head_dim=8,
                            qk_rope_head_dim=8, v_head_dim=8, absorb=True,
                            fast_path=fast_path).eval()
    cache = layer.make_cache(2)
    x = torch.randn(2, 41, 64, generator=torch.Generator().manual_seed(3))
    prompt_mask = torch.ones(2, 40, dtype=torch.bool)
    prompt_mask[1, :3] = not padded
    masks = sdpa_masks(monkeypatch)
    log, out = step_after_prompt(layer, cache, x, prompt_mask)
    held = cache.entries[:, :40].numel() * 4  # bytes of the latents and rotary keys held
    assert log.allocations_of_at_least(held) == [] and log.writes_of_at_least(held) == []
    assert log.read_backs == 0 and cache.has_padding == padded
    assert_masks_only_with_padding(log, masks, fast_path, padded)
    torch.testing.assert_close(out, one_pass_last(layer, x, prompt_mask), atol=1e-5,
                               rtol=1e-5)  # the step is one pass's last position


def test_cache_bytes_are_the_formula_and_the_tensors():
    layer = small()
    cache = layer.make_cache(3)
    expected = latent_cache_bytes(num_layers=1, kv_lora_rank=12, qk_rope_head_dim=4,
                                  num_tokens=32, batch_size=3, bytes_per_value=4)
    assert cache.nbytes == expected == 3 * 32 * (12 + 4) * 4
    entries, mask = cache.append(torch.randn(3, 2, 12), torch.randn(3, 2, 4))
    assert entries.shape == (3, 2, 16) and mask.shape == (3, 2) and cache.length == 2
    assert entries.data_ptr() == cache.entries.data_ptr()  # a view, never a copy


def test_a_reset_cache_forgets_the_padding_it_held():
    """A cache that held left-padded rows, reset and reused on unpadded ones, gives what a fresh
    cache gives: the old padding flags would hide real keys."""
    layer = small()
    x = torch.randn(2, 6, 16, generator=torch.Generator().manual_seed(4))
    padding = torch.ones(2, 6, dtype=torch.bool)
    padding[1, :4] = False
    with torch.no_grad():
        used = layer.make_cache(2)
        layer(x, padding, cache=used)
        used.reset()
        again = [layer(x[:, :3], cache=used), layer(x[:, 3:], cache=used)]
        fresh = layer.make_cache(2)
        expected = [layer(x[:, :3], cache=fresh), layer(x[:, 3:], cache=fresh)]
    for got, want in zip(again, expected):
        assert torch.equal(got, want)
    assert bool(used.key_padding[:, : used.length].all())


def test_deepseek_v3_published_config():
    """One layer of DeepSeek-V3 as published: its sizes, its cache per token and per layer (576
    numbers), a tenth of multi-head attention's at the same head sizes and far less."""
    source, config = DEEPSEEK_V3
    with torch.device("meta"):  # shapes only: the real layer holds 187 M weights
        layer = LatentAttention.from_hf_config(config, 60, context_length=8)
    assert (layer.num_heads, layer.kv_lora_rank, layer.qk_rope_head_dim) == (128, 512, 64)
    assert layer.W_query_down.weight.shape == (1536, 7168)
    assert layer.W_kv_down.weight.shape == (512 + 64, 7168)
    assert layer.W_kv_up.weight.shape == (128 * (128 + 128), 512)
    assert layer.out_proj.weight.shape == (7168, 128 * 128)
    assert layer.scale == pytest.approx((0.1 * torch.log(torch.tensor(40.0)).item() + 1) ** 2 / 192**0.5)
    assert layer.make_cache(1).entries.shape == (1, 8, 576)
    mha = 128 * (192 + 128)  # keys and values of every head at the same sizes
    assert (512 + 64) / mha < 1 / 10
    with pytest.raises(ValueError, match="layer_idx=61 is beyond the config's 61 layers"):
        LatentAttention.from_hf_config(config, 61, context_length=8)


def test_the_published_sizes_are_transformers_defaults():
    """transformers' DeepseekV3Config defaults are DeepSeek-V3's: our copied fields agree."""
    pytest.importorskip("transformers")
    from transformers import DeepseekV3Config

    defaults = DeepseekV3Config()
    _, config = DEEPSEEK_V3
    for field in ("hidden_size", "num_hidden_layers", "num_attention_heads", "q_lora_rank",
                  "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
        assert getattr(defaults, field) == config[field], field


def test_deinterleave_gathers_neighbours_into_halves():
    assert deinterleave(torch.arange(6.0)).tolist() == [0.0, 2.0, 4.0, 1.0, 3.0, 5.0]


BAD_ARGUMENTS = [
    (dict(num_heads=0), ValueError, "num_heads must be a positive int, got 0"),
    (dict(qk_rope_head_dim=5), ValueError, "qk_rope_head_dim must be even"),
    (dict(kv_lora_rank=2.5), TypeError, "kv_lora_rank must be a positive int, got 2.5"),
    (dict(absorb="yes"), TypeError, "absorb must be True or False"),
    (dict(scale=-1.0), ValueError, "scale must be positive, got -1.0"),
    (dict(rope_scaling={"factor": 4}), ValueError, "rope_scaling must be None or a dict with"),
    (dict(dropout=1.0), ValueError, "dropout"),
]


@pytest.mark.parametrize("change, error, message", BAD_ARGUMENTS)
def test_bad_arguments_are_named(change, error, message):
    arguments = dict(d_in=16, d_out=16, context_length=8, dropout=0.0, num_heads=4, **SMALL)
    with pytest.raises(error, match=message):
        LatentAttention(**{**arguments, **change})


def test_bad_inputs_are_named():
    layer = small()
    with pytest.raises(ValueError, match="d_in=16"):
        layer(torch.randn(2, 3, 8))
    with pytest.raises(TypeError, match="cache must be a LatentCache or None, got KVCache"):
        from llm_attention.kv_cache import KVCache

        layer(torch.randn(1, 3, 16), cache=KVCache(1, 4, 4, 8))
    cache = LatentCache(1, 8, 4, 8)
    with pytest.raises(ValueError, match=r"latent must have shape \(B=1, T_new, 8\), got \(1, 3, 12\)"):
        cache.append(torch.randn(1, 3, 12), torch.randn(1, 3, 4))
    full = layer.make_cache(1)
    layer(torch.randn(1, 30, 16), cache=full)
    with pytest.raises(ValueError, match="positions 30..32 go beyond context_length=32"):
        layer(torch.randn(1, 3, 16), cache=full)
    layer.absorb = 1
    with pytest.raises(TypeError, match="absorb must be True or False"):
        layer(torch.randn(1, 3, 16))
    with pytest.raises(ValueError, match="model_type 'llama' has no latent attention"):
        LatentAttention.from_hf_config({"model_type": "llama"})
    with pytest.raises(ValueError, match="not a weight of a latent attention layer"):
        from_hf_state_dict({"q_a_proj.weight": torch.zeros(1), "k_proj.weight": torch.zeros(1)})


TUNED = dict(temperature_tuning=(3, 0.5, 0))  # Mistral 4's rule: floor(m / 3) from m = 0


@pytest.mark.parametrize("absorb, fast", PATHS)
def test_temperature_tuned_queries_decode_as_one_pass_and_padded_rows_as_alone(absorb, fast):
    """Mistral 4's query scale counts each row's positions from its first real token: a padded
    row equals its prompt alone, in one pass and through the cache (4 + 6 + 2 tokens)."""
    layer = small(**TUNED)
    layer.absorb, layer.fast_path = absorb, fast
    x = torch.randn(3, 12, 16, generator=torch.Generator().manual_seed(3))
    padding = torch.ones(3, 12, dtype=torch.bool)
    padding[1, :4], padding[2, :7] = False, False
    with torch.no_grad():
        whole = layer(x, padding)
        cache = layer.make_cache(3)
        steps = [layer(x[:, a:b], padding[:, a:b], cache=cache) for a, b in ((0, 4), (4, 10),
                                                                             (10, 12))]
        for row, first in ((1, 4), (2, 7)):
            alone = layer(x[row:row + 1, first:])[0]
            torch.testing.assert_close(whole[row, first:], alone, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch.cat(steps, dim=1)[padding], whole[padding],
                               atol=1e-5, rtol=1e-5)


def test_temperature_tuning_scales_each_query_by_its_position():
    """Queries at positions 3.. are scaled by 1 + 0.5 ln 2, at 6.. by 1 + 0.5 ln 3: the same as
    the untuned layer with its query projection scaled row by row."""
    tuned, plain = small(**TUNED), small()
    plain.load_state_dict(tuned.state_dict())
    x = torch.randn(1, 7, 16)
    for t, steps in ((2, 0), (5, 1), (6, 2)):
        scale = 1 + 0.5 * torch.log1p(torch.tensor(float(steps)))
        with torch.no_grad():
            scaled = small()
            scaled.load_state_dict(tuned.state_dict())
            scaled.W_query_up.weight.mul_(scale)
        torch.testing.assert_close(tuned(x[:, : t + 1])[0, t], scaled(x[:, : t + 1])[0, t],
                                   atol=1e-5, rtol=1e-5)
    assert (tuned(x)[0, 3:] - plain(x)[0, 3:]).abs().max() > 1e-3
    torch.testing.assert_close(tuned(x)[0, :3], plain(x)[0, :3])


@pytest.mark.parametrize("tuning", [(3,), (3, -0.5), (0, 0.5), (3, 0.5, -1), "3,0.5"])
def test_bad_temperature_tuning(tuning):
    with pytest.raises(ValueError, match="temperature_tuning must be None or"):
        small(temperature_tuning=tuning)

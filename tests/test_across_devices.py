"""Attention split across 2 CPU processes (gloo) equals one process doing all the work.

The processes start once (``llm_attention_site.devices.run_all``, a rendezvous through a
file; the page, the tests and the site build of one run share the result through
``$LLM_ATTENTION_RUN_CACHE``) and run every check; the tests read what they measured:
- tensor parallelism (``parallelize_module``, query/key/value projections split by
  rows, the output projection by columns): each process computes its own heads, with
  its own KV cache; outputs, gradients and cached decoding equal the whole module;
- FSDP2 (``fully_shard``): the tiny GPT trained with its parameters sharded, each
  process on half the batch, follows one process on the whole batch, and its sharded
  checkpoint reloads into an unsharded model;
- ring attention: the sequence split two ways, forward and backward equal to full
  causal attention.
"""

from __future__ import annotations

import re

import pytest
import torch
import torch.distributed as dist

from llm_attention.ring_attention import balanced_positions, causal_pairs, contiguous_positions

pytestmark = [
    pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not built"),
    pytest.mark.xdist_group("across devices"),  # one worker starts the processes once
]
WORLD = 2


@pytest.fixture
def found(across_devices):
    return across_devices


def test_tensor_parallel_heads_equal_the_whole_module(found):
    for process in found["processes"]:
        checks = process["tensor parallel"]
        # seven modules (latent attention plain and absorbed, with and without the
        # query bottleneck of DeepSeek-V3) on two paths, and ModernAttention with sinks
        # and a soft cap on the explicit path alone
        assert len(checks) == 15, sorted(checks)
        assert any("sinks" in name for name in checks), sorted(checks)
        assert sum("Latent" in name for name in checks) == 8, sorted(checks)
        assert sum("q_lora_rank" in name for name in checks) == 4, sorted(checks)
        for name, check in checks.items():
            assert check["output"] <= 1e-6, (name, check)
            assert check["cached decoding"] <= 1e-6, (name, check)
            # float32 sums in another order: within a millionth of the largest gradient
            assert check["gradients"] <= 1e-6 * max(1.0, check["largest gradient"]), (name, check)
            assert check["heads here"] == 4 // WORLD, (name, check)


def test_a_training_step_sums_exactly_the_published_gradients(found):
    """Two SGD steps split by heads equal the whole module's when the processes sum the
    gradients replicated_gradients_to_sum names; summing every whole weight's gradient
    instead counts the whole ones twice (the query bottleneck, the latent's
    down-projection and norm)."""
    for process in found["processes"]:
        training = process["tensor parallel training"]
        assert len(training) == 6, sorted(training)  # no absorbed twins: same weights
        for name, check in training.items():
            assert check["summed"] <= 1e-6, (name, check)
            if check["whole"]:
                assert check["every whole weight summed"] > 1e-3, (name, check)
        v3 = training["LatentAttention (q_lora_rank)"]
        assert v3["summed names"] == []
        assert v3["whole"] == ["W_query_down.weight", "query_norm.weight",
                               "W_kv_down.weight", "latent_norm.weight"]
        lite = training["LatentAttention (4 heads)"]
        assert lite["summed names"] == [] and lite["whole"] == [
            "W_kv_down.weight", "latent_norm.weight"]
        sinks = training["ModernAttention (2 kv, sinks, soft cap)"]
        assert sinks["summed names"] == ["sinks"] and sinks["whole"] == []


def test_the_plan_follows_the_layer_s_own_projections():
    from torch import nn
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    from llm_attention.latent import LatentAttention
    from llm_attention.modern import ModernAttention
    from llm_attention.multihead import MultiHeadAttention
    from llm_attention_site.devices import replicated_gradients_to_sum, tensor_parallel_plan

    def styles(module):
        return {name: type(style) for name, style in tensor_parallel_plan(module).items()}

    latent = dict(kv_lora_rank=8, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8)
    bottleneck = LatentAttention(32, 32, 16, 0.0, 4, q_lora_rank=12, **latent)
    assert styles(bottleneck) == {"W_query_up": ColwiseParallel, "W_kv_up": ColwiseParallel,
                                  "out_proj": RowwiseParallel}
    assert set(styles(LatentAttention(32, 32, 16, 0.0, 4, **latent))) == {
        "W_query", "W_kv_up", "out_proj"}
    assert set(styles(MultiHeadAttention(32, 32, 16, 0.0, 4))) == {
        "W_query", "W_key", "W_value", "out_proj"}
    modern = ModernAttention(32, 32, 16, 0.0, 4, 2, qk_norm=True, sinks=True)
    assert replicated_gradients_to_sum(modern) == ["sinks", "q_norm.weight", "k_norm.weight"]
    assert replicated_gradients_to_sum(bottleneck) == []
    with pytest.raises(ValueError, match="Linear has no query projection"):
        tensor_parallel_plan(nn.Linear(2, 2))
    modern.extra = nn.Parameter(torch.zeros(3))  # a weight the rule does not know
    with pytest.raises(ValueError, match=r"ModernAttention\.extra is neither split"):
        replicated_gradients_to_sum(modern)


def test_a_key_value_head_is_not_cut_in_two(found):
    message = found["processes"][0]["uneven heads"]
    assert "num_kv_heads=1" in message and "4 key rows" in message, message


def test_latent_heads_here_are_all_in_one_process_and_must_come_whole():
    from torch import nn

    from llm_attention.latent import LatentAttention

    module = LatentAttention(32, 32, 16, 0.0, 4, kv_lora_rank=8, qk_nope_head_dim=8,
                             qk_rope_head_dim=4, v_head_dim=8)
    assert module.heads_here() == 4
    module.W_kv_up = nn.Linear(8, 3 * 16, bias=False)  # as if it held 3 heads, the query 4
    expected = ("this process holds 48 query rows and 48 rows of W_kv_up: expected whole "
                "heads (12 query rows and 16 W_kv_up rows each), the same heads in both")
    with pytest.raises(ValueError, match=re.escape(expected)):
        module(torch.randn(1, 3, 32))


def test_held_heads_are_all_of_them_in_one_process():
    from llm_attention.checks import held_heads

    sinks = torch.arange(4.0)
    assert held_heads(sinks, torch.nn.Linear(2, 8), 4) is sinks


def test_fsdp2_training_follows_one_process_and_its_checkpoint_reloads(found):
    for process in found["processes"]:
        fsdp = process["fsdp"]
        assert fsdp["largest loss difference"] <= 1e-6, fsdp
        assert fsdp["largest parameter difference"] <= 1e-6, fsdp
        assert fsdp["parameters held here"] == fsdp["parameters"] // WORLD, fsdp
        losses = fsdp["losses, one process"]
        assert losses[-1] < losses[0]  # it trained
    assert found["reloaded"] <= 1e-6


def test_ring_attention_equals_full_causal_attention(found):
    for rank, process in enumerate(found["processes"]):
        for split, positions in (("balanced", balanced_positions), ("contiguous", contiguous_positions)):
            ring = process["ring"][split]
            assert ring["positions here"] == positions(16, rank, WORLD).tolist()
            assert ring["output"] <= 1e-6 and ring["gradients"] <= 1e-6, (split, ring)


def test_ring_attention_with_one_token_per_process(found):
    """Each process's own block is then one key at its query's position: not a block of
    the future, so it is scored (a NaN output otherwise: a query with no key)."""
    for rank, process in enumerate(found["processes"]):
        ring = process["ring, one token each"]
        assert ring["positions here"] == [rank]
        assert ring["output"] <= 1e-6 and ring["gradients"] <= 1e-6, ring


def test_the_balanced_split_shares_the_causal_work():
    balanced = causal_pairs([balanced_positions(16, r, 4) for r in range(4)])
    contiguous = causal_pairs([contiguous_positions(16, r, 4) for r in range(4)])
    assert sum(balanced) == sum(contiguous) == 16 * 17 // 2  # every allowed pair, once
    assert balanced == [34] * 4  # chunks i and 7 - i: (2i + 1) + (2i + 2) + ... = 34
    assert contiguous == [10, 26, 42, 58]  # the last slice scores 5.8 x the first's
    with pytest.raises(ValueError, match="num_tokens must split into 8 equal chunks for 4 processes, got 12"):
        balanced_positions(12, 0, 4)


def test_one_run_is_shared_through_the_run_cache_and_code_changes_start_another(
        monkeypatch, tmp_path):
    from llm_attention import induction
    from llm_attention_site import devices

    runs = []
    monkeypatch.setattr(devices, "_run", lambda world: runs.append(world) or {"run": len(runs)})
    monkeypatch.setenv(induction.CACHE_ENV, str(tmp_path))
    assert devices.run_all(WORLD) == devices.run_all(WORLD) == {"run": 1}
    assert runs == [WORLD]
    monkeypatch.setattr(devices, "_cache_key", lambda world: "other code")
    assert devices.run_all(WORLD) == {"run": 2}
    monkeypatch.setenv(induction.CACHE_ENV, "")  # no folder: every call runs
    assert devices.run_all(WORLD) == {"run": 3}
    assert devices.run_all(WORLD) == {"run": 4}


def test_world_must_be_two_processes_or_more():
    from llm_attention_site import devices

    for world in (1, True, 2.0):
        expected = f"world must be an int of 2 or more processes, got {world!r}"
        with pytest.raises(ValueError, match=re.escape(expected)):
            devices.run_all(world)

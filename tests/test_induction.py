"""The induction task: batches, scores on hand-made weights, the trained model, and the training caches."""

from __future__ import annotations

import re

import pytest
import torch

from llm_attention import induction
from llm_attention.induction import (
    InductionConfig,
    head_scores,
    make_batch,
    new_model,
    trained_model,
)

CONFIG = InductionConfig()


def batch(size=64, seed=0, config=CONFIG):
    return make_batch(config, size, torch.Generator().manual_seed(seed))


def test_a_batch_repeats_one_segment_of_distinct_tokens():
    b = batch()
    s = CONFIG.segment
    assert b.tokens.shape == (64, CONFIG.seq_len)
    for row, first, second in zip(b.tokens, b.first.tolist(), b.second.tolist(), strict=True):
        assert second >= first + s and second + s <= CONFIG.seq_len
        assert torch.equal(row[first : first + s], row[second : second + s])
        assert len(set(row.tolist())) == CONFIG.seq_len - s  # every other id is distinct
    assert len(set(b.second.tolist())) > 5  # the place of the copy varies


def test_predictable_positions_are_answered_by_the_first_copy():
    b = batch()
    rows, positions = b.predictable(CONFIG.segment)
    offset = (b.second - b.first)[rows]
    assert torch.equal(b.tokens[rows, positions + 1], b.tokens[rows, positions - offset + 1])
    assert torch.equal(b.tokens[rows, positions], b.tokens[rows, positions - offset])


def test_scores_of_hand_made_heads():
    """A head that always attends to t - 1 scores 1 as previous-token; one that attends
    just after the earlier match scores 1 as induction; a uniform head scores low on both."""
    b = batch(8)
    t = CONFIG.seq_len
    previous = torch.zeros(8, t, t)
    previous[:, 0, 0] = 1.0
    previous[:, torch.arange(1, t), torch.arange(t - 1)] = 1.0
    inductive = torch.eye(t).repeat(8, 1, 1)
    rows, positions = b.predictable(CONFIG.segment)
    after = positions - (b.second - b.first)[rows] + 1
    inductive[rows, positions] = 0.0
    inductive[rows, positions, after] = 1.0
    uniform = torch.ones(t, t).tril() / torch.arange(1, t + 1)[:, None]
    weights = [torch.stack([previous, inductive, uniform.expand(8, t, t)], dim=1)]  # (B, 3, T, T)
    prev_score, ind_score = head_scores(weights, b, CONFIG.segment)
    assert prev_score[0, 0] == 1.0 and ind_score[0, 1] == 1.0
    assert ind_score[0, 0] < 0.2 and prev_score[0, 2] < 0.2 and ind_score[0, 2] < 0.2


def test_the_trained_model_solves_the_repeat_with_layer_1_induction_heads():
    model, losses, _ = trained_model()
    b = batch(256, seed=99)
    with torch.no_grad(), model.record_attention() as weights:
        logits = model(b.tokens)
    _, accuracy = induction.repeat_loss_and_accuracy(logits, b, CONFIG.segment)
    assert accuracy > 0.9 > 10 / CONFIG.vocab_size  # chance is 1 / vocab_size
    assert sum(losses[-20:]) / 20 < 0.2 * losses[0]
    prev_score, ind_score = head_scores(weights, b, CONFIG.segment)
    assert ind_score[1].max() > 0.7 and prev_score[0].max() > 0.3
    layer_1 = [(1, h) for h in range(CONFIG.num_heads)]
    with torch.no_grad(), model.ablate(layer_1):
        _, ablated = induction.repeat_loss_and_accuracy(model(b.tokens), b, CONFIG.segment)
    assert ablated < 0.3


def test_trained_model_returns_a_fresh_copy_each_time():
    first, _, _ = trained_model()
    with torch.no_grad():
        first.out_head.weight.zero_()
    second, _, _ = trained_model()
    assert second.out_head.weight.abs().sum() > 0


def test_disk_cache_is_shared_and_keyed_by_config(tmp_path, monkeypatch):
    monkeypatch.setenv(induction.CACHE_ENV, str(tmp_path))
    tiny = InductionConfig(steps=3, seed=123)
    state, losses, _ = induction._train_or_load(tiny)
    assert len(losses) == 3 and len(list(tmp_path.glob("induction-*.pt"))) == 1

    def no_training(config):
        raise AssertionError("trained again instead of loading the saved run")

    monkeypatch.setattr(induction, "train", no_training)
    again, losses_again, _ = induction._train_or_load(tiny)  # as another process would
    assert losses_again == losses
    assert all(torch.equal(again[name], state[name]) for name in state)
    with pytest.raises(AssertionError, match="trained again"):
        induction._train_or_load(InductionConfig(steps=3, seed=124))  # another key


def test_bad_config_and_sizes():
    with pytest.raises(TypeError, match="config must be an InductionConfig, got dict"):
        trained_model({})
    with pytest.raises(ValueError, match=re.escape("need vocab_size >= seq_len >= 2 * segment, got vocab_size=32, seq_len=12, segment=8")):
        batch(config=InductionConfig(seq_len=12))


def test_a_nudge_changes_the_initial_weights_by_about_a_millionth():
    plain = new_model(InductionConfig())
    nudged = new_model(InductionConfig(nudge=1))
    other = new_model(InductionConfig(nudge=2))
    for (name, a), b, c in zip(
        plain.named_parameters(), nudged.parameters(), other.parameters()
    ):
        assert torch.equal(a == 0, b == 0), name  # a zero (a bias) stays zero
        if (a == 0).all():
            continue
        relative = ((b - a) / a)[a != 0].abs()
        assert 0 < relative.max() < 1e-5, name  # changed, by about 1e-6
        assert not torch.equal(b, c), name  # each nudge its own noise

"""drkernel's algorithms inside verl: registry lookups, verl's own compute_advantage on a DataProto,
the policy loss against verl's vanilla PPO loss, and MRS/PRS as zeroed loss masks."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from verl import DataProto
from verl.trainer.config import AlgoConfig
from verl.trainer.ppo import core_algos, ray_trainer

from drkernel.errors import ConfigError
from drkernel.rl.integrations.verl import algorithms as alg
from drkernel.rl.integrations.verl.turns import per_turn_values, turn_layout, turn_rewards

# Three trajectories of one response width T = 9 (1 = answer token, 0 = feedback or padding):
#   traj 0: turns at [0, 2) and [4, 7)          (two turns)
#   traj 1: turns at [0, 3), [5, 6) and [7, 9)  (three turns)
#   traj 2: turn at [0, 4)                      (one turn, then padding)
MASK = torch.tensor([[1, 1, 0, 0, 1, 1, 1, 0, 0], [1, 1, 1, 0, 0, 1, 0, 1, 1], [1, 1, 1, 1, 0, 0, 0, 0, 0]])


def test_turn_layout_by_hand():
    lay = turn_layout(MASK)
    assert lay.traj_id.tolist() == [0, 0, 1, 1, 1, 2]
    assert lay.turn.tolist() == [0, 1, 0, 1, 2, 0]
    assert lay.last_token.tolist() == [1, 6, 2, 5, 8, 3]
    assert lay.row_of_token[0].tolist() == [0, 0, -1, -1, 1, 1, 1, -1, -1]
    # a reward written after an answer (on feedback or padding) belongs to that answer
    assert lay.span_of_token[0].tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 1]
    rewards = torch.zeros(3, 9)
    rewards[0, 8] = 2.0  # verl's scalar-at-the-end placement lands in the last turn's span
    rewards[1, 3] = 1.0
    assert turn_rewards(rewards, lay).tolist() == [0.0, 2.0, 1.0, 0.0, 0.0, 0.0]
    # truncated trajectories keep only the turns that are in the batch; missing lists fill
    assert per_turn_values([[1, 2, 9], [3, 4, 5], None], lay, 3, fill=0.0).tolist() == [1, 2, 3, 4, 5, 0]


def test_registry_holds_our_functions():
    assert core_algos.get_adv_estimator_fn("trloo") is alg.compute_trloo_advantage
    assert core_algos.get_policy_loss_fn("drkernel_ppo") is alg.compute_drkernel_policy_loss
    assert getattr(ray_trainer.compute_advantage, "_drkernel_hook", False)
    assert alg.install_driver_hook() is False  # wrapping twice is refused


def _batch(turn_rewards_per_traj, uids, mask=MASK) -> DataProto:
    b, t = mask.shape
    scores = torch.zeros(b, t)
    last = (
        mask.shape[1] - 1 - torch.flip(mask, dims=[1]).argmax(dim=1)
    )  # verl: total reward on the last token
    scores[torch.arange(b), last] = torch.tensor([sum(r) for r in turn_rewards_per_traj], dtype=torch.float32)
    data = DataProto.from_dict(
        tensors={
            "response_mask": mask.clone(),
            "token_level_scores": scores,
            "token_level_rewards": scores.clone(),
        },
        non_tensors={
            "uid": np.array(uids, dtype=object),
            alg.TURN_REWARDS: np.array(turn_rewards_per_traj + [None], dtype=object)[:-1],
        },
    )
    return data


def test_trloo_through_verls_compute_advantage_matches_hand_values():
    # traj 0 and 1 share prompt "a"; traj 2 is alone in prompt "b".
    rewards = [[0.5, 1.5], [0.0, 1.0, 2.0], [0.7]]
    data = _batch(rewards, ["a", "a", "b"])
    out = ray_trainer.compute_advantage(data, adv_estimator="trloo", config=AlgoConfig(gamma=1.0))
    # reward-to-go: traj0 G = [2.0, 1.5]; traj1 G = [3.0, 3.0, 2.0]; traj2 G = [0.7]
    # turn 0 group {traj0, traj1}: A0 = 2.0 - 3.0 = -1.0, A1 = 3.0 - 2.0 = 1.0
    # turn 1 group {traj0, traj1}: A0 = 1.5 - 3.0 = -1.5, A1 = 3.0 - 1.5 = 1.5
    # turn 2 group {traj1} alone: A = G = 2.0; traj2 alone at turn 0: A = G = 0.7
    expected = torch.tensor(
        [
            [-1.0, -1.0, 0, 0, -1.5, -1.5, -1.5, 0, 0],
            [1.0, 1.0, 1.0, 0, 0, 1.5, 0, 2.0, 2.0],
            [0.7, 0.7, 0.7, 0.7, 0, 0, 0, 0, 0],
        ]
    )
    torch.testing.assert_close(out.batch["advantages"], expected)
    # the hook moved each turn's reward onto its own last token; the total is unchanged
    assert out.batch["token_level_rewards"][1].tolist() == [0, 0, 0.0, 0, 0, 1.0, 0, 0, 2.0]
    torch.testing.assert_close(out.batch["token_level_rewards"].sum(-1), torch.tensor([2.0, 3.0, 0.7]))


def test_void_turns_get_zero_advantage_and_leave_the_baseline():
    # traj 0 scores at turn 0, then fails at turn 1 (void); traj 1 fails then scores.
    data = _batch([[1.0, 0.0], [0.0, 1.0, 0.5], [0.2]], ["a", "a", "a"])
    adv = ray_trainer.compute_advantage(data, adv_estimator="trloo", config=AlgoConfig()).batch["advantages"]
    assert adv[0, 4:7].abs().sum() == 0  # void turn
    # turn 1 group without the void turn is {traj1} alone: A = G = 1.5
    assert adv[1, 5].item() == pytest.approx(1.5)


def test_multi_turn_batch_without_our_turn_record_is_refused():
    # Before: the trajectory total on the last token became the last turn's reward, and per-turn
    # credit and void turns were lost without a word.
    data = _batch([[0.0, 2.0], [0.0, 0.0, 1.0], [0.5]], ["a", "a", "a"])
    data.non_tensor_batch.pop(alg.TURN_REWARDS)
    with pytest.raises(ConfigError, match="multi-turn batch without per-turn rewards"):
        ray_trainer.compute_advantage(data, adv_estimator="trloo", config=AlgoConfig())


def test_single_turn_batch_without_our_turn_record_is_its_own_turn():
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 0, 0, 0]])
    data = _batch([[2.0], [1.0], [0.0]], ["a", "a", "a"], mask=mask)
    data.non_tensor_batch.pop(alg.TURN_REWARDS)
    adv = ray_trainer.compute_advantage(data, adv_estimator="trloo", config=AlgoConfig()).batch["advantages"]
    # leave-one-out: 2 - (1 + 0) / 2 = 1.5; 1 - (2 + 0) / 2 = 0; 0 - (2 + 1) / 2 = -1.5
    assert adv[:, 0].tolist() == [1.5, 0.0, -1.5]


def _actor_config(**info):
    return OmegaConf.create(
        {
            "clip_ratio": 0.2,
            "clip_ratio_low": 0.2,
            "clip_ratio_high": 0.28,
            "clip_ratio_c": 3.0,
            "global_batch_info": info,
        }
    )


@pytest.mark.parametrize("agg", ["seq-mean-token-sum", "token-mean", "seq-mean-token-mean"])
@pytest.mark.parametrize("info", [{}, {"dp_size": 2, "global_batch_size": 5, "batch_num_tokens": 31}])
def test_policy_loss_equals_verls_dual_clip_ppo(agg, info):
    g = torch.Generator().manual_seed(0)
    old = torch.randn(3, 9, generator=g) - 2
    new = (old + 0.5 * torch.randn(3, 9, generator=g)).requires_grad_()
    adv = torch.randn(3, 9, generator=g) * 2
    weights = torch.rand(3, 9, generator=g) * 2
    ours, metrics = core_algos.get_policy_loss_fn("drkernel_ppo")(
        old, new, adv, MASK, agg, _actor_config(**info), rollout_is_weights=weights
    )
    theirs, their_metrics = core_algos.get_policy_loss_fn("vanilla")(
        old, new.detach(), adv, MASK, agg, _actor_config(**info), rollout_is_weights=weights
    )
    torch.testing.assert_close(ours, theirs)
    assert metrics["actor/pg_clipfrac"] == pytest.approx(their_metrics["actor/pg_clipfrac"])
    ours.backward()
    assert new.grad is not None and new.grad[MASK == 0].abs().sum() == 0


def test_mrs_and_prs_zero_the_rejected_turns_after_the_advantages():
    rewards = [[0.5, 1.5], [0.0, 1.0, 2.0], [0.7]]
    data = _batch(rewards, ["a", "a", "a"])
    old = torch.full((3, 9), -1.0)
    rollout = old.clone()
    rollout[1, 5] = old[1, 5] + 10.0  # traj 1 turn 1: token ratio e^-10 < 1e-4 -> vetoed
    data.batch["old_log_probs"], data.batch["rollout_log_probs"] = old, rollout
    data.non_tensor_batch[alg.TURN_COVERAGE] = np.array(
        [[0.9, 0.2], [0.0, 0.5, 0.9], [0.35]] + [None], dtype=object
    )[:-1]
    data.non_tensor_batch[alg.TURN_CORRECT] = np.array([[1, 1], [0, 1, 1], [1]] + [None], dtype=object)[:-1]
    data.non_tensor_batch[alg.TURN_HACKED] = np.array([[0, 0], [0, 0, 0], [0]] + [None], dtype=object)[:-1]
    metrics = alg.apply_rejection(
        data, alg.HookConfig(mrs_low=1e-9, mrs_high=1e9, prs="turn"), torch.Generator().manual_seed(0)
    )
    mask = data.batch["response_mask"]
    # PRS: coverage 0.2 -> p = 0 (traj 0 turn 1 dropped); 0.9 and 0.5 -> p = 1; incorrect turns are kept;
    # traj 2's coverage 0.35 -> p = 0.5, a draw. MRS: traj 1 turn 1 vetoed.
    assert mask[0].tolist() == [1, 1, 0, 0, 0, 0, 0, 0, 0]
    assert mask[1].tolist() == [1, 1, 1, 0, 0, 0, 0, 1, 1]
    assert metrics["drkernel/mrs_rejected_turns"] == pytest.approx(1 / 6)
    # a geometric-mean ratio outside [0.999, 1.001] drops the whole trajectory (MRS)
    data2 = _batch(rewards, ["a", "a", "a"])
    data2.batch["old_log_probs"], data2.batch["rollout_log_probs"] = old, old - 0.01
    alg.apply_rejection(data2, alg.HookConfig(prs=None), torch.Generator())
    assert data2.batch["response_mask"].sum() == 0


def test_importance_weights_written_per_turn():
    data = _batch([[0.5, 1.5], [0.0, 1.0, 2.0], [0.7]], ["a", "a", "a"])
    old = torch.zeros(3, 9)
    rollout = torch.zeros(3, 9)
    rollout[0, 4:7] = -0.1  # turn 1 of traj 0: log-ratio 0.1 per token -> turn weight e^0.3
    data.batch["old_log_probs"], data.batch["rollout_log_probs"] = old, rollout
    alg.apply_rejection(data, alg.HookConfig(mrs=False, prs=None, importance_level="turn"), torch.Generator())
    w = data.batch["rollout_is_weights"]
    torch.testing.assert_close(w[0, 4:7], torch.full((3,), float(np.exp(0.3))))
    assert w[0, :2].tolist() == [1.0, 1.0] and w[1].tolist() == [1.0] * 9


def test_hook_config_errors_name_the_values(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="prs='always'"):
        alg.HookConfig(prs="always")
    with pytest.raises(ConfigError, match="unknown verl HookConfig keys: \\['mrs_hi'\\]"):
        alg.HookConfig.from_dict({"mrs_hi": 2})
    path = tmp_path / "hook.yaml"
    path.write_text("prs: trajectory-geometric\nimportance_level: geometric\n")
    monkeypatch.setenv(alg.CONFIG_ENV, str(path))
    assert alg.HookConfig.from_env() == alg.HookConfig(
        prs="trajectory-geometric", importance_level="geometric"
    )


def test_verls_v1_advantage_step_is_refused_loudly():
    # verl's v1 trainer builds this batch from TransferQueue fields (uid, response_mask, rm_scores)
    # alone, so per-turn rewards and void turns are lost; trloo refuses instead of training on the
    # wrong credit. (v1.utils binds compute_advantage at import: it gets our hook only when the plugin
    # was imported first, as VERL_USE_EXTERNAL_MODULES does; the estimator checks either way.)
    from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories

    data = _batch([[0.5, 1.5], [0.0, 1.0, 2.0], [0.7]], ["a", "a", "b"])
    data.non_tensor_batch.pop(alg.TURN_REWARDS)
    with pytest.raises(ConfigError, match="multi-turn batch without per-turn rewards.*trainer.use_v1=false"):
        compute_advantage_for_multi_trajectories(
            data, batch_keys=["a_0_0", "a_1_0", "b_0_0"], adv_estimator="trloo", config=AlgoConfig()
        )
    single = _batch([[1.0], [0.0]], ["a", "a"], mask=torch.tensor([[1, 1, 0], [1, 0, 0]]))
    estimator = core_algos.get_adv_estimator_fn("trloo")
    with pytest.raises(ConfigError, match="outside drkernel's driver hook"):  # no hook: no MRS, no PRS
        estimator(single.batch["token_level_rewards"], single.batch["response_mask"], np.array(["a", "a"]), AlgoConfig())


def test_void_turn_returns_match_the_trainers():
    # The batch of tests/rl/test_void_turns.py in verl's layout: later rewards flow through the void
    # turn into the earlier turns' returns, exactly as in drkernel's own trainer.
    mask = torch.tensor([[1, 1, 0, 1, 1, 0, 1, 1], [1, 1, 0, 1, 1, 0, 1, 1]])
    data = _batch([[1.0, 0.0, 2.0], [0.0, 0.0, 1.0]], ["a", "a"], mask=mask)
    out = ray_trainer.compute_advantage(data, adv_estimator="trloo", config=AlgoConfig())
    firsts = [0, 3, 6]  # first token of each turn
    assert out.batch["advantages"][:, firsts].tolist() == [[2.0, 0.0, 1.0], [-2.0, 1.0, -1.0]]
    assert out.batch["returns"][:, firsts].tolist() == [[3.0, 2.0, 2.0], [1.0, 1.0, 1.0]]

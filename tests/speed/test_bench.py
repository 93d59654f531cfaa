import pytest

from glm53.model.config import ModelConfig
from glm53.speed.bench import format_report, run_bench
from glm53.speed.ceiling import flops_per_token


def test_flops_per_token_of_the_default_model():
    flops = flops_per_token(ModelConfig(), 128)
    assert flops["active_matmul_parameters"] == 9_800_448  # qkv+out+router+3 experts per layer, plus the head
    assert 59e6 < flops["train_flops_per_token"] < 61e6


@pytest.mark.slow
def test_quick_bench_reports_every_figure_on_the_same_weights():
    result = run_bench(quick=True, isolate=False, log=lambda *_: None)
    assert result["same_weights"]
    assert set(result["train"]) == {"plain", "fast", "fast_fp32"}
    assert set(result["generation"]) == {"plain_uncached_one_group", "fast_cached_one_group",
                                            "fast_cached_one_group_fp32", "fast_cached_many_groups"}
    for name, row in result["train"].items():
        assert row["tokens_per_second"] > 0 and row["peak_memory_bytes"] > 0 and row["matmul_gflops_beside"] > 0
        assert 0 < result["fraction_of_matmul_ceiling_beside"][name] and 0 < result["fraction_of_matmul_ceiling"][name]
        assert len(row["matmul_gflops_per_step"]) == len(row["step_seconds"]) - row["warmup_steps"] + 1
        assert result["fraction_of_matmul_ceiling_step_by_step"][name] > 0
    assert result["generation"]["fast_cached_many_groups"]["completions"] == 8
    assert all(v > 0 for v in result["ratios"].values())
    report = format_report(result)
    assert "ratios" in report
    assert f"cpu: {result['machine']['cpu']['model']}" in report  # which CPU and which settings made these figures
    assert f"fast path: training {result['machine']['fast_precision']}" in report and "kernels: " in report


def test_step_by_step_fraction_sets_each_step_against_the_higher_ceiling_beside_it():
    from glm53.speed.bench import step_by_step_fraction

    phase = {"step_seconds": [9.0, 1.0, 2.0, 4.0], "warmup_steps": 1, "matmul_gflops_per_step": [100, 50, 200, 100]}
    # 100 GFLOP a step: 100 / 1 s / 100, 100 / 2 s / 200, 100 / 4 s / 200 -> 1.0, 0.25, 0.125
    assert step_by_step_fraction(phase, 100e9) == 0.25


@pytest.mark.slow
def test_profile_accounts_for_every_component_of_a_step():
    from glm53.data.pretrain_batches import pretraining_batch
    from glm53.model.model import GLM53
    from glm53.speed.profile import profile_training

    model = GLM53(ModelConfig(dim=32, layers=4, heads=4, expert_hidden=48, experts=4, sparse_window=8,
                              sparse_stride=8))
    result = profile_training(model, [pretraining_batch(s, 2, 128) for s in range(2)], "fp32", warmup=1)
    expected = {"embedding", "block norms", "final norm", "linear attention", "sparse attention", "moe experts",
                "hyper-connections", "other"}
    assert expected <= set(result["forward"]["parts"]) and "moe routing" in result["forward"]["parts"]
    assert expected <= set(result["backward"]["parts"])
    for kind in ("forward", "backward"):
        parts = result[kind]["parts"]
        assert all(v >= 0 for v in parts.values()) and parts["linear attention"] > 0
        assert abs(sum(parts.values()) - result[kind]["total"]) < 1e-6 or parts["other"] == 0.0
    total = result["forward"]["total"] + result["loss"] + result["backward"]["total"] + result["optimizer"]
    assert abs(total - result["step"]) < 1e-6
    assert not model._forward_hooks and all(not m._forward_hooks for m in model.modules())  # hooks removed


@pytest.mark.slow
def test_operator_split_counts_matrix_products_and_their_flops():
    from glm53.data.pretrain_batches import pretraining_batch
    from glm53.model.model import GLM53
    from glm53.speed.profile import operator_split

    model = GLM53(ModelConfig(dim=32, layers=4, heads=4, expert_hidden=48, experts=4, sparse_window=8,
                              sparse_stride=8))
    split = operator_split(model, [pretraining_batch(s, 2, 128) for s in range(2)], "fp32")
    assert split["matrix_product_seconds"] > 0 and split["other_operator_seconds"] > 0
    assert split["matrix_product_gflops_per_second"] > 0 and split["operator_calls"] > 100 and split["steps"] == 2


@pytest.mark.slow
def test_a_recipe_profiles_as_pretraining_builds_it():
    """`glm53 bench --profile --recipe`: the record's model, tokenizer and Muon, at small shapes here."""
    from glm53.speed.profile import format_profile, profile_recipe_phase

    small = {"batch_size": 2, "sequence_length": 64}
    fast = profile_recipe_phase("muon-qk-bpe-dense", False, 1, 0, small)
    plain = profile_recipe_phase("muon-qk-bpe-dense", True, 1, 0, small)
    assert plain["precision"] == "fp32" and fast["optimizer"] > 0 and fast["operators"]["operator_calls"] > 100
    for phase in (fast, plain):
        assert 0 < phase["fraction_of_ceiling"] < 1 and phase["matmul_ceiling_gflops"] > 0
        assert 0 <= phase["outside_operators_seconds"] < phase["step"]
    # the record's 2048-token vocabulary and dim 128: its head is 2048 x 128 of each position's FLOPs
    assert fast["train_gflops_per_step"] > 6 * 2048 * 128 * 2 * 64 / 1e9
    text = format_profile({"fast": fast, "plain": plain})
    assert "fraction of it" in text and "outside the operators" in text

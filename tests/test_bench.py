from glm53.bench import flops_per_token, format_report, run_bench
from glm53.model.config import ModelConfig


def test_flops_per_token_of_the_default_model():
    flops = flops_per_token(ModelConfig(), 128)
    assert flops["active_matmul_parameters"] == 9_800_448  # qkv+out+router+3 experts per layer, plus the head
    assert 59e6 < flops["train_flops_per_token"] < 61e6


def test_quick_bench_reports_every_figure_on_the_same_weights():
    result = run_bench(quick=True, isolate=False, log=lambda *_: None)
    assert result["same_weights"]
    assert set(result["train"]) == {"plain", "fast", "fast_fp32"}
    assert set(result["generation"]) == {"plain_uncached_one_group", "fast_cached_one_group",
                                            "fast_cached_one_group_fp32", "fast_cached_many_groups"}
    for row in result["train"].values():
        assert row["tokens_per_second"] > 0 and row["peak_memory_bytes"] > 0
    assert result["generation"]["fast_cached_many_groups"]["completions"] == 8
    assert all(v > 0 for v in result["ratios"].values())
    assert "ratios" in format_report(result)

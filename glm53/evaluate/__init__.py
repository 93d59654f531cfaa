"""Evaluation: scores with receipts, and comparisons of them. Read in this order:

    eval_config.py  what an evaluation does (EvalConfig: decoding and sandbox time), what `glm53 eval` takes
    pass_at_k.py  the unbiased pass@k estimator (Chen et al. 2021), plain Python
    evaluate.py  `glm53 eval`: greedy pass@1 or sampled pass@k on frozen splits or task files
    split_scores.py  several splits scored in one evaluation (larger decoding batches), one receipt per split
    humaneval_score.py  HumanEval as the main job and the sweeps score it: a prompt past the context with the whole
                 token cap fails undecoded, named
    body_loss.py  teacher-forced loss of a split's reference bodies: a smooth score where pass@1 is near 0
    stats.py     paired statistics: McNemar, bootstrap intervals, Holm, sign-flip tests
    power.py     the smallest effect those paired tests detect at an observed spread, and the seeds for a given one
    compare.py   `glm53 compare`: paired comparison of evaluation receipts on the same tasks
    commands.py  `glm53 eval` and `glm53 compare`
"""

"""Training: pretraining, then RL with the verifier's reward. Read in this order:

    schedule.py            learning-rate schedules (warmup, constant or cosine)
    run_folder.py          a run's folder over its life: started, refused, resumed exactly (checkpoints/ holds the
                           format of what it writes)
    pretrain_config.py     `glm53 pretrain`'s settings (PretrainConfig)
    validation.py          pretraining's validation loss on held-out rows, leaving training untouched
    loss.py                the training loss: a language term plus the balance, MTP and indexer terms, each weighted
    pretrain.py            `glm53 pretrain`: next-byte cross-entropy plus the router balance term, exact resume
    expression_pretrain.py the pretraining-data studies' own job: the miniature on expression data
    rl_config.py           `glm53 rl`'s settings (RLConfig) and the objective's choices
    rewards.py             rewards as code: the reward functions (the built-in modes among them), their ordering
                           check on a probe set, the rollouts' rewards and advantages
    policy_gradient.py     the policy-gradient objective piece by piece: advantages, aggregations, clipping
    completion_batch.py    the update's log-probabilities: each group's prompt run once, its completions per row
    rl_update.py           the policy update (update_policy): clipped passes, KL and replay terms; the train scope
    rl.py                  `glm53 rl`: RLOO post-training with an executable reward, the loop
    commands.py            `glm53 pretrain` and `glm53 rl`, run as this process's rank under torchrun
"""

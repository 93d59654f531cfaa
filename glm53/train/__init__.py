"""Training: pretraining, then RL with the verifier's reward. Read in this order:

    schedule.py            learning-rate schedules (warmup, constant or cosine)
    optimization.py        Optimization: the optimizer settings every training nests (light)
    muon.py                Muon for the hidden matrices, AdamW for the rest (--optimizer muon)
    optimizers.py          the pretraining optimizers built: AdamW on the matrices, or Muon beside AdamW
    run_folder.py          a run's folder over its life: started, refused, resumed exactly (checkpoints/ holds the
                           format of what it writes)
    pretrain_config.py     `glm53 pretrain`'s settings (PretrainConfig)
    validation.py          pretraining's validation loss on held-out rows, leaving training untouched
    loss.py                the training loss: a language term plus the balance, MTP and indexer terms, each weighted
    training_start.py      what a pretraining run starts from (build_training), shared with `glm53 speedrun`
    pretrain.py            `glm53 pretrain`: next-byte cross-entropy plus the router balance term, exact resume
    expression_pretrain.py the pretraining-data studies' own job: the miniature on expression data
    rl_config.py           `glm53 rl`'s settings (RLConfig) and the objective's choices
    policy_gradient.py     the policy-gradient objective piece by piece: advantages, aggregations, clipping
    rl_scoring.py          the step's groups scored: rewards (verify/rewards.py), signal, advantages, the batch
    completion_batch.py    the update's log-probabilities: each group's prompt run once, its completions per row
    rl_update.py           the policy update (update_policy): clipped passes, KL and replay terms; the train scope
    rl.py                  `glm53 rl`: RLOO post-training with an executable reward, the loop
    commands.py            `glm53 pretrain` and `glm53 rl`, run as this process's rank under torchrun
"""

"""The recipe book: every named recipe of glm53, one TOML file each, in the flags' own names. Read in this order:

    book.py       the reader: a recipe by name, its chain of parents, its settings resolved; the speedrun's record
    e4.toml       the speedrun's rows (docs/speedrun.md), each its parent plus one change: e4 (the first row),
                  muon, muon-qk, muon-qk-bpe, muon-qk-bpe-dense (the record)
    full.toml     `glm53 run`'s presets: full (the main job, docs/main-job.md), quick (a small version of it),
                  broad (docs/broad-run.md: muon-qk-bpe's pretraining, then RL by expert iteration)
    code.toml     the code run (docs/code-run.md: the broad run aimed at problems people wrote), and code-stream.toml,
                  it with every pretraining row from the stream (code-mix-confirm's verdict)
    broad-rl-*.toml, full-rl-*.toml
                  RL arms the studies measured, kept by name as run recipes: broad-rl-budget-4x (the broad preset's
                  RL on the afternoon of 2026-12-04), broad-rl-last-block-head (its RL before that),
                  full-rl-groups-of-16 (the main job's RL before groups of 4)

A recipe names its parent and the one change it makes; resolving it lays each recipe of its chain over the one
before. `glm53 pretrain --recipe NAME` and `glm53 speedrun --recipe NAME` take a recipe's pretraining,
`glm53 run --preset NAME` a whole run recipe, and a sweep spec's `[setup]` or `[base]` may name one and state only
what differs. Recorded recipes never change (tests/recipes/test_recipe_book.py holds each file's sha256): a new
result is a new recipe whose parent is the old one.

What stays elsewhere, as facts of their own: the model's architectures (glm53/model/config.py MODEL_PRESETS, which
a recipe names as `architecture = "broad"`) and each suite's stage defaults (glm53/data/suites.py).
"""

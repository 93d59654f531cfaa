"""Studies across arms and seeds: `glm53 sweep` runs them and `glm53 analyze` tests them. Read in this order:

    spec.py          a study's spec (TOML): arms, seeds, checkpoints, comparisons; the shipped specs in specs/
    jobs.py          the kinds of job a sweep runs, one registry entry each
    scored_per_split.py  the jobs scored on every split of a suite: rl-splits (RL, then every split before and
                     after: each split's lift) and pretrain-splits
    corpus_job.py    the corpus job: a [setup] that builds the corpus of real code the arms read
    executor.py      where jobs run: the local pool, each job a process forked from a preloaded server
    ray_executor.py  `--executor ray`: every job a Ray task
    runner.py        `glm53 sweep`: every (arm, seed) as an independent job, in parallel, resumable
    analysis.py      `glm53 analyze`: per arm and checkpoint, paired tests per comparison, lifts against zero,
                     REPORT.md and charts, each effect beside the smallest the design could detect
    wording.py       how those figures read: a metric's unit, the detectable-effect phrase of each test
    timing.py        the wall-time estimate of a plan: a short timing, or a pilot's job times
    plan.py          `glm53 sweep --plan`: the jobs, an estimated wall time and the seeds needed, writing nothing
    commands.py      `glm53 sweep` and `glm53 analyze`
"""

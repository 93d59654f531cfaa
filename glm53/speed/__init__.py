"""Speed: what a step costs on this machine, the fastest settings for it, and the time to a fixed target (the
speedrun). Read in this order:

    bench.py      `glm53 bench`: the plain and the fast path timed on the same weights
    ceiling.py    the matmul ceiling and a training step's FLOPs, which bench and profile measure a step against
    profile.py    `glm53 bench --profile`: a training step's time by component, forward and backward
    calibrate.py  `glm53 calibrate`: precisions and kernel settings chosen by timing the candidates here (the cache
                  it writes is read by runtime/kernel_settings.py)
    speedrun_config.py  `glm53 speedrun`'s settings (SpeedrunConfig) and its target; its recipes are the
                  speedrun's rows of the recipe book (glm53/recipes/)
    speedrun.py   `glm53 speedrun`: pretraining as `glm53 pretrain` starts and steps it (train/training_start.py),
                  until the dev body loss reaches the target, on the clock
    commands.py   `glm53 bench`, `glm53 calibrate` and `glm53 speedrun`
"""

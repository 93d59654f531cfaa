"""Speed: what a step costs on this machine, and the fastest settings for it. Read in this order:

    bench.py      `glm53 bench`: the plain and the fast path timed on the same weights
    profile.py    `glm53 bench --profile`: a training step's time by component, forward and backward
    calibrate.py  `glm53 calibrate`: precisions and kernel settings chosen by timing the candidates here (the cache
                  it writes is read by runtime/kernel_settings.py)
    commands.py   `glm53 bench` and `glm53 calibrate`
"""

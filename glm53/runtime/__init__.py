"""What every stage runs on: settings, files, devices, processes, trackers. Read in this order:

    settings.py     command-line flags generated from config dataclasses (one name, one default)
    files.py        atomic, never-overwriting file output; run-folder locks; JSON Lines
    device.py       device and precision choice (auto), CPU description, autocast
    distributed.py  data parallelism under torchrun
    tracking.py     `--report-to`: per-step figures also sent to an experiment tracker
"""

"""What every stage runs on: settings, files, devices, processes, trackers, and the work a lower floor asks
for by role. Read in this order:

    composition.py      config dataclasses made of others: walked, built, recorded flat, given flat arguments
    settings.py         command-line flags generated from config dataclasses (one name, one default)
    config_file.py      settings from a TOML file or a run's record (--config), printed as TOML (--print-config)
    setting_history.py  the settings added or retired since a record was written: how an old record reads today
    config.py           RuntimeConfig (device, precision, threads, progress, resume, tracker, isolation policy),
                        nested by every stage's config, and the one list of what a resumed run may change
    files.py            atomic, never-overwriting file output; run-folder locks; JSON Lines
    cpu.py              the CPU at hand: model, family numbers, cores, the flags that matter (native bf16)
    kernel_settings.py  the calibration cache, read: what --precision auto and --kernels auto take from it
    device.py           device and precision choice (auto), peak memory, autocast
    memory.py           what a setting needs in memory against what the machine has: refused before any work
    distributed.py      data parallelism under torchrun
    tracking.py         `--report-to`: per-step figures also sent to an experiment tracker
    providers.py        work a lower floor asks for by role and a higher one provides (GLM53.generate's decoding)
"""

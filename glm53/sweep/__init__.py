"""Studies across arms and seeds: `glm53 sweep` runs them (spec.py, jobs.py, executor.py, runner.py) and
`glm53 analyze` tests them (analysis.py)."""

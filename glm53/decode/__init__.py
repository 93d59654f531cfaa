"""Decoding: completions from a model. Read in this order:

    sampling.py     how tokens are drawn (Sampling), how a task's completions are (TaskDecoding), and the shared
                    defaults: temperature 0.35, 48 new tokens, the evaluation seed
    generate.py     the plain generator (the whole prefix again for every token) and the sampler
    engine.py       the cached engine: batched group sampling, as RL and evaluation use it
    speculative.py  self-speculative greedy decoding: the MTP block drafts, the model checks
    task_completions.py  the completions of tasks as evaluation, RL and `glm53 generate --tasks` make them: the
                    suite's stop rule, the batch cap
    bulk.py         the completions of many tasks as the rows `glm53 verify` reads (`glm53 generate --tasks`)
    interactive.py  `glm53 generate --interactive`: prompts from stdin, completions streamed as they are made
    text_generation.py  text in, text and token ids out: `GLM53.generate` and `glm53 generate --prompt`, one
                    function, streaming as an iterator when asked
    commands.py     `glm53 generate`: one prompt, many tasks, or interactive
"""

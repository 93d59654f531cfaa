"""The data: what the model reads and what it is asked to do. Read in this order:

    tokenizer.py         bytes to ids: 4 special ids, the 256 byte values, 3 reserved image ids
    bpe_tokenizer.py     byte-pair tokenizers trained on the broad stream (vocabularies/), and tokenizer_for(config)
    tasks.py             the reference suite: eight Python task families, frozen splits, the task-file format
    pretrain_batches.py  pretraining batches: one generated function per row, a pure function of (seed, step)
    run_order.py         a run's documents in another order (blocked, curriculum) or from fewer distinct ones
    corpus.py            your own pretraining data (--corpus): files or JSON Lines rows, cut into rows, some held out
    broad/               the broad suite: a registry of primitives as data, trees, descriptions, cases, splits
    suites.py            the suites as one registry (reference, broad): tasks per split, stream, level, stop rule
    expressions.py       the pretraining-data studies' expression data ("88 structures") and held-out scores
    commands.py          `glm53 tasks export`
"""

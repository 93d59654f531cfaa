"""What a run writes: checkpoint folders and what is kept and exported of them. Every stage reads them, so this
floor lies just above model/ and runtime/. Read in this order:

    names.py       the names of a run's checkpoint folders and files (light: configs use them)
    format.py      a checkpoint written atomically, loaded with its hashes checked (LoadedModel); weights_sha256
    retention.py   what a run keeps of its checkpoints: --keep-last N, --save-optimizer
    export.py      `glm53 export`: a weights-only folder with a model card
    commands.py    `glm53 export`'s parser
"""

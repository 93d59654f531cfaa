"""The vision miniature. Read in this order:

    digits.py    generated seven-segment digit images
    tower.py     the faithful miniature tower, the direct-patch baseline, VisionLanguageModel
    training_config.py  how the digit task trains (DigitTraining), the pilot's training
    train.py     `glm53 vision`: training and evaluation of both towers, paired test, full-model pilot
    commands.py  `glm53 vision`: the flags and the receipt
"""

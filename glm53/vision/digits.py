"""Seven-segment digit images, generated on the fly: the vision benchmark needs no dataset download.

Each 32 x 32 RGB image shows one digit drawn from the seven segment boxes below, shifted by up to 2 pixels,
in a random colour and intensity, with uniform pixel noise. Everything comes from a CPU torch.Generator seeded
by the caller, so a seed names a set of images exactly. Colour is independent of the label.
"""

from __future__ import annotations

import torch

IMAGE_SIZE = 32
SEGMENT_BOXES = {  # (y0, y1, x0, x1), half-open, before the shift
    "a": (4, 7, 8, 24), "g": (14, 17, 8, 24), "d": (25, 28, 8, 24),
    "f": (6, 15, 5, 8), "b": (6, 15, 24, 27), "e": (16, 26, 5, 8), "c": (16, 26, 24, 27),
}
DIGIT_SEGMENTS = {0: "abcdef", 1: "bc", 2: "abged", 3: "abgcd", 4: "fgbc", 5: "afgcd", 6: "afgecd", 7: "abc",
                  8: "abcdefg", 9: "abfgcd"}
HELD_OUT_SEED_OFFSET = 10_000


def render_digits(labels: torch.Tensor | list[int], seed: int, noise: float = 0.06) -> torch.Tensor:
    """labels [B] in 0..9 -> images [B, 3, 32, 32] in [0, 1]."""
    labels = torch.as_tensor(labels, dtype=torch.long)
    if labels.numel() and (labels.min() < 0 or labels.max() > 9):
        raise ValueError("digit labels must lie in 0..9")
    g = torch.Generator().manual_seed(int(seed))
    images = torch.zeros(len(labels), 3, IMAGE_SIZE, IMAGE_SIZE)
    for i, label in enumerate(labels.tolist()):
        dy, dx = (int(v) for v in torch.randint(-2, 3, (2,), generator=g))
        colour = 0.55 + 0.45 * torch.rand(3, generator=g)
        intensity = 0.80 + 0.20 * torch.rand(1, generator=g)
        for segment in DIGIT_SEGMENTS[label]:
            y0, y1, x0, x1 = SEGMENT_BOXES[segment]
            y0, y1 = max(0, y0 + dy), min(IMAGE_SIZE, y1 + dy)
            x0, x1 = max(0, x0 + dx), min(IMAGE_SIZE, x1 + dx)
            images[i, :, y0:y1, x0:x1] = (colour * intensity)[:, None, None]
    images += noise * torch.rand(images.shape, generator=g)
    return images.clamp_(0.0, 1.0)


def training_batch(step: int, batch_size: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The training stream: labels cycle through 0..9, images drawn with seed + step."""
    labels = (torch.arange(batch_size) + step) % 10
    return render_digits(labels, seed + step), labels


def held_out_set(examples: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed evaluation set rendered from a seed no training batch uses."""
    labels = torch.arange(examples) % 10
    return render_digits(labels, HELD_OUT_SEED_OFFSET + seed + 1_000_003), labels

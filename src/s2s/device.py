"""Where a stage runs: `train.device` / `translate.device` (auto, cpu or cuda) as a torch device."""

from __future__ import annotations

import torch


def pick_device(name: str, *, key: str) -> torch.device:
    """`auto`: CUDA when torch sees a GPU, else the CPU; `cuda` without one is an error naming
    `key`, where the choice came from (`train.device`, `translate.device`, `--device`)."""
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"{key} is 'cuda' but torch sees no CUDA device "
                           f"(torch {torch.__version__}; install a CUDA build, see README)")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name)

"""Training snapshots: where the train stage keeps them and how it indexes them.

The train stages of ``analysis.models`` keep a checkpoint at each epoch of ``analysis.snapshots``
(``s2s.train.Snapshots`` writes them) in ``snapshots/<model>/``: one ``epoch<E>.pt`` per epoch
and an index, ``snapshots.json``: ``{"snapshots": [{"epoch", "step", "file"}, ...],
"final_epoch", "total_steps"}``. The analyze stage reads the index to measure gradient reach over
training. Both import this module (torch-free) and the index's record
(:class:`s2s.artifacts.SnapshotIndex`), so the format has one home and the analyze stage does not
depend on the trainer's code.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

SNAPSHOT_INDEX = "snapshots.json"


def snapshot_file(epoch: float) -> str:
    """The file of the snapshot at `epoch`: ``epoch0.25.pt``, ``epoch1.pt`` (its six significant
    digits, `:g`), or, where those do not give the epoch back (0.1234561), its exact decimal form
    (``epoch0.1234561.pt``), so that no two epochs of ``analysis.snapshots`` share a file."""
    text = f"{epoch:g}"
    if float(text) != epoch:
        text = repr(float(epoch))
    return f"epoch{text}.pt"


def snapshots_due(epochs: Sequence[float], *, steps_per_epoch: int,
                  total_steps: int) -> dict[float, int]:
    """epoch -> the step its snapshot is taken at (before that step's update), for the epochs
    whose step comes before the last one, in epoch order."""
    steps = {float(e): round(e * steps_per_epoch) for e in sorted(set(epochs))}
    return {e: s for e, s in steps.items() if s < total_steps}


def read_index(folder: str | Path):
    """A snapshot folder's index (:class:`s2s.artifacts.SnapshotIndex`, what
    ``s2s.train.Snapshots.publish`` wrote), checked against its record; one listing a file that is
    not there is refused naming the file."""
    from s2s.artifacts import ArtifactError, SnapshotIndex

    folder = Path(folder)
    path = folder / SNAPSHOT_INDEX
    index = SnapshotIndex.read(path)
    missing = [s.file for s in index.snapshots if not (folder / s.file).is_file()]
    if missing:
        raise ArtifactError(f"{path}: lists {', '.join(missing)}, not in {folder}; rerun its "
                            "train stage")
    return index

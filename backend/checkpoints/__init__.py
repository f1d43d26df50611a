"""Generated Gemma 4 checkpoints: random weights, the real architecture, loadable offline."""

from backend.checkpoints.sizes import SIZES, CheckpointSize
from backend.checkpoints.writer import GeneratedCheckpoint, make_checkpoint

__all__ = ["SIZES", "CheckpointSize", "GeneratedCheckpoint", "make_checkpoint"]

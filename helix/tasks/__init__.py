"""The task graph in bead format, and the tracker that persists it.

Knows nothing of the memory."""

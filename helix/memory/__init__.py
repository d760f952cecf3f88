"""The insight memory: storing, recalling, learning from feedback, upkeep.

Knows nothing of tasks or agents."""

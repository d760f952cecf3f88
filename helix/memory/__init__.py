"""The insight memory: storing, recalling, learning from feedback, safety, upkeep.

Imports nothing of tasks or agents; the tables it reads as evidence (attempts,
settlements) and the engines under it are :mod:`helix.store`'s."""

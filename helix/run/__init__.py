"""``helix run``: the supervisor, its agent runners, run log and state."""

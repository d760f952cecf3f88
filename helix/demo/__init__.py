"""``helix demo``: the memory loop offline on a scratch project."""

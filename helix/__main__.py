"""``python -m helix`` runs the CLI."""

from helix.cli import main

main()

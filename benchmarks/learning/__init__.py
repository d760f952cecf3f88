"""The learning-curve benchmark (issue 6): does learning from verified outcomes
make builders pass more often? See ``simulation.py`` for the model and
``run.py`` for the command."""

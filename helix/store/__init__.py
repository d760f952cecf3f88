"""The store: the database helix keeps, on SQLite (embedded, the default) or
PostgreSQL (a team's shared store).

The engine seam and its errors (:mod:`helix.store.db`, :mod:`helix.store.postgres`),
the numbered migrations both engines share (:mod:`helix.store.migrations`), who may
do what in a shared store (:mod:`helix.store.roles`), and one module per family of
tables that are not the insight memory's: attempts, settlements, spawns, the judge's
settings, learning candidates, the task table and fleet runs, and the dashboard's
aggregated reads. It imports only the ground layer: what the rows mean is for the
layers above."""

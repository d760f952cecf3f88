"""The small family of errors the library raises.

The CLI turns each into one line on stderr and an exit code that says whose move
it is. ``InvalidInput`` (``CycleError`` included) exits 2, "called wrongly": the
arguments or the input must change, wherever it was raised, like click's own
usage errors. Every other ``HelixError`` exits 1, "could not do it": the request
was well formed but helix could not carry it out (no such insight, text refused,
store or model unusable). Hook commands keep their own contract: they fail open.
"""


class HelixError(Exception):
    """Base class: something helix could not do, with a message fit for a user."""


class NotFound(HelixError):
    """A named thing (insight, edge, archive entry) does not exist."""


class InvalidInput(HelixError):
    """The caller passed something malformed: bad JSON, unknown kind, empty query."""


class Rejected(HelixError):
    """Content refused by a rule (too short, too long, flagged by the safety screen)."""


class Screened(Rejected):
    """Content refused by the safety screen: the one refusal a person may vouch past."""


class StoreError(HelixError):
    """The database cannot be opened or written (corrupt, read-only, newer schema)."""


class ModelUnavailable(HelixError):
    """The embedding model's files are missing or do not match their pinned hashes."""


class Busy(HelixError):
    """Another process is changing it at this moment (a task another runner is
    claiming): nothing was done, and the same request may succeed in a moment."""


class CycleError(InvalidInput):
    """A dependency would close a loop in the task graph; the message shows it."""

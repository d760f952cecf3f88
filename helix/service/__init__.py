"""What a user can ask of helix, one call per verb, shared by every surface.

- :mod:`helix.service.actions`: the verbs (recall, store, edit, retag, archive,
  restore, purge, tasks, inject, settle), each the library call the CLI makes;
  the MCP server's tools and the dashboard's actions call these.
- :mod:`helix.service.views`: what the dashboard shows, as plain records read
  from the store, the task tracker and the run log.

Nothing here imports the MCP SDK or a web framework.
"""

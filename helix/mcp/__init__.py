"""``helix mcp serve``: helix's memory, task graph and build loop over MCP.

Two layers, so the SDK stays an optional extra:

- :mod:`helix.service.actions` is plain helix, shared with the CLI and the
  dashboard: one method per tool, each the same library call the matching CLI
  command makes, returning JSON-ready typed records. It never imports the SDK,
  and tests call it directly.
- :mod:`helix.mcp.server` is the skin on the official SDK (``mcp``, installed
  by ``helix[mcp]``): it declares the tools with typed, described parameters,
  runs each call in a worker thread, and turns helix's errors into tool errors.
- :mod:`helix.mcp.http_transport` serves it over HTTP (``--http``): loopback
  only, a bearer token on every request, bounded sessions and bodies.

Nothing here is imported by ``helix`` or ``helix.cli`` at start-up; the SDK
takes seconds to import and must never be on the hook path.
"""

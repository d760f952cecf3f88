"""``helix ui``: the local dashboard (Starlette, Jinja2, htmx; ``helix[ui]``).

- :mod:`helix.ui.server` binds, prints the one-time login URL, runs uvicorn.
- :mod:`helix.ui.gate` is the security of every request: every URL under a
  secret path prefix, the token exchanged once for an HttpOnly SameSite=Strict
  cookie scoped to that path, the Host header checked against the bound address
  (DNS rebinding), a CSRF token on every POST, no CORS.
- :mod:`helix.ui.app` assembles the pages (:mod:`helix.ui.pages`), each a thin
  skin over :mod:`helix.service`: the dashboard reads what the CLI's JSON says
  and changes the memory only through the verbs the CLI and MCP server call.
- :mod:`helix.ui.svg` draws the plots on the server: the page loads nothing
  from anywhere but this server.

The app never runs VERIFY or an agent. Nothing here is imported by the CLI at
start-up or by a hook.
"""

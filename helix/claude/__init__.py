"""The Claude Code (and Codex) side: hook handlers and the plugin installer."""

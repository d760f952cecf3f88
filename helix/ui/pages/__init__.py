"""The dashboard's pages: each module here holds one area's ``routes`` (found by
:func:`helix.ui.app.routes`), its handlers thin: read through
:mod:`helix.service`, render a template, or call one service verb on a POST."""

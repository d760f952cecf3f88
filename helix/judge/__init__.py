"""Settlement's judge, built rather than checked: snapshot -> construct -> run -> verdict.

- :mod:`helix.judge.snapshot`: at an attempt's start, the judge's files by content
  (kept in :mod:`helix.judge.objects`) and the declared environment's digest;
- :mod:`helix.judge.tree`: at settlement, a fresh tree from the snapshot and the
  builder's work (:mod:`helix.judge.listing`), the judge's files restored;
- :mod:`helix.judge.run`: the recorded VERIFY on that tree, in the environment
  (:mod:`helix.judge.environment`) and the sandbox (:mod:`helix.judge.sandbox`)
  the project's settings choose (:mod:`helix.judge.settings`);
- :mod:`helix.judge.verdict`: the exit code and how it was reached.

What a file is to a judge (a test, configuration, what VERIFY runs) is
:mod:`helix.judge.kinds`. Crediting the verdict is the loop's
(:mod:`helix.loop.attribution`).
"""

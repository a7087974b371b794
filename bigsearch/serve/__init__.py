"""The labelling page: ``bigsearch serve SESSION`` (docs/serve.md).

``labeler`` (the session, the item on show, the next items computed ahead),
``explain`` (a score as an exact sum over the labeled points), ``records`` (what a
point looks like, read from the store), ``app`` (the Flask routes and the guards),
``server`` (running it with waitress); the page itself is in ``static/``.
"""

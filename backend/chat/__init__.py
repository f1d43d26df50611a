"""The chat room: the conversation and its history, and one turn through the engines.

* ``conversation`` and ``store``: the visible branch of a chat; its SQLite history.
* ``export``: a chat as Markdown or as a JSON performance receipt.
* ``turn``: the turn pipeline the app and ``ask`` share; ``rendering`` hands its events on.
* ``compare`` and ``parity``: compare mode's result; token-parity verdicts.
"""

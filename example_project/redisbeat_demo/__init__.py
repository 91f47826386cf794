"""The redisbeat demo runner: ``python example_project/demo.py`` (or ``make demo``)."""

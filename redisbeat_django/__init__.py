"""redisbeat_django: edit redisbeat schedules in the Django admin.

Add ``"redisbeat_django"`` to ``INSTALLED_APPS``; rows of :class:`~.models.PeriodicTask` are
pushed to Redis when their transaction commits, and the admin shows their live state.
"""

"""The Django project of the redisbeat_django tests (and the admin benchmark): settings, URLs
and the Celery app whose store the fixtures point at their redis-server."""

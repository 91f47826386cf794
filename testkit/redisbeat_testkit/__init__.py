"""Real servers and processes for redisbeat's tests, benchmarks and demo, always cleaned up.

Each module holds one kind of thing: :mod:`.ports` (free ports, polling with a deadline),
:mod:`.processes` (stopping processes, ``celery beat`` processes), :mod:`.redis_server`,
:mod:`.sentinel`, :mod:`.cluster` (a Redis Cluster; its nodes, their views and when they
agree in :mod:`.cluster_process`, :mod:`.cluster_view`, :mod:`.cluster_health`),
:mod:`.postgres`, :mod:`.proxy` (a TCP proxy that injects faults),
:mod:`.messages` (what beats put on the broker queue), :mod:`.proj` (the Celery app the
beats run) and :mod:`.djangosite` (the Django project of the tests).
"""

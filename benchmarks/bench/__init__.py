"""Side-by-side benchmarks of redisbeat, celery-redbeat and django-celery-beat (`make bench`)."""

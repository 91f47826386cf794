"""The beat: Celery's scheduler interface and the loop that claims, sends, finishes and waits.

It drives the store (:mod:`redisbeat.store`) and the sender (:mod:`redisbeat.sending`) and
keeps the beat's own health: its lease, outages and backoff, the activity line, deploys.
"""

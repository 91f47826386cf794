"""The shop's periodic tasks. They are quick: each logs a line and returns."""

from __future__ import annotations

import random

from celery import shared_task
from celery.utils.log import get_task_logger

log = get_task_logger(__name__)


@shared_task(name="orders.send_digest")
def send_digest() -> int:
    """Email the staff a digest of the orders placed since the last one."""
    count = random.randint(0, 12)
    log.info("digest: %d new orders", count)
    return count


@shared_task(name="orders.expire_carts")
def expire_carts(max_age_minutes: int = 30) -> int:
    """Release the stock held by carts abandoned for longer than ``max_age_minutes``."""
    expired = random.randint(0, 3)
    log.info("expired %d carts older than %d min", expired, max_age_minutes)
    return expired


@shared_task(name="orders.sync_inventory")
def sync_inventory(warehouse: str = "main") -> str:
    """Pull stock levels from the warehouse system."""
    log.info("inventory synced from %s", warehouse)
    return warehouse


@shared_task(name="orders.nightly_report")
def nightly_report(recipients: list[str] | None = None) -> int:
    """Build the sales report and send it to ``recipients``."""
    sent_to = recipients or ["sales@example.com"]
    log.info("report sent to %s", ", ".join(sent_to))
    return len(sent_to)


@shared_task(name="orders.purge_cancelled")
def purge_cancelled(days: int = 90) -> int:
    """Delete cancelled orders older than ``days``."""
    log.info("purged cancelled orders older than %d days", days)
    return 0

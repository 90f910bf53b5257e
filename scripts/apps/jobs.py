"""Job and task functions the application checks run (imported by the
RQ worker and the Celery worker, so they live in a module of their own)."""

import os

from celery import Celery


def add(x, y):
    """An RQ job: its result is checked by the driver."""
    return x + y


def fail():
    """An RQ job that always raises: it must land in the failed registry."""
    raise ValueError("this job fails on purpose")


celery_app = Celery(
    "apps",
    broker=os.environ.get("APPS_REDIS_URL", "redis://127.0.0.1:6379/0"),
    backend=os.environ.get("APPS_REDIS_URL", "redis://127.0.0.1:6379/0"),
)
celery_app.conf.update(task_serializer="json", result_serializer="json", accept_content=["json"])


@celery_app.task(name="apps.multiply")
def multiply(x, y):
    """A Celery task: its result comes back through the Redis backend."""
    return x * y

"""Runs the application checks against one server: an RQ queue (200 jobs,
a scheduled job, a failing job) and Celery (100 tasks through the Redis
broker and result backend). Prints one line per check and exits non-zero
when any fails. Usage: check.py NAME URL (workers are started here)."""

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta, timezone

NAME, URL = sys.argv[1], sys.argv[2]
# The Celery app in `jobs` reads its broker address when imported.
os.environ["APPS_REDIS_URL"] = URL

from redis import Redis  # noqa: E402
from rq import Queue  # noqa: E402
from rq.registry import FailedJobRegistry  # noqa: E402

import jobs  # noqa: E402
HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.path.dirname(sys.executable)
results = []


def report(check, ok, detail=""):
    results.append(ok)
    print(f"{'PASS' if ok else 'FAIL'} {NAME} {check}{': ' + detail if detail else ''}", flush=True)


def start(args, log):
    env = dict(os.environ, APPS_REDIS_URL=URL, PYTHONPATH=HERE)
    out = open(log, "w")
    return subprocess.Popen(args, cwd=HERE, env=env, stdout=out, stderr=subprocess.STDOUT,
                            start_new_session=True)


def stop(proc):
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def wait_for(predicate, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return predicate()


def rq_checks(logdir):
    conn = Redis.from_url(URL)
    queue = Queue("apps", connection=conn)
    added = [queue.enqueue(jobs.add, i, i) for i in range(200)]
    scheduled_at = time.time()
    later = queue.enqueue_in(timedelta(seconds=3), jobs.add, 1000, 1)
    failing = queue.enqueue(jobs.fail)
    worker = start([os.path.join(BIN, "rq"), "worker", "apps", "--with-scheduler", "--url", URL],
                   os.path.join(logdir, f"rq-worker-{NAME}.log"))
    try:
        def all_done():
            pending = added + [later, failing]
            return all(j.get_status(refresh=True) in ("finished", "failed") for j in pending)
        finished = wait_for(all_done, 150)
        report("rq worker finishes every job", finished)
        wrong = [j.id for i, j in enumerate(added)
                 if j.get_status(refresh=True) != "finished" or j.return_value() != 2 * i]
        report("rq 200 job results", not wrong, f"{len(wrong)} wrong" if wrong else "")
        later.refresh()
        ended = 0.0
        if later.ended_at is not None:
            at = later.ended_at
            ended = (at if at.tzinfo else at.replace(tzinfo=timezone.utc)).timestamp()
        ok = (later.get_status(refresh=True) == "finished" and later.return_value() == 1001
              and ended >= scheduled_at + 2.5)
        ran = f"ran {ended - scheduled_at:.1f}s after enqueue" if ended else "never ran"
        report("rq scheduled job runs after its delay", ok, f"status {later.get_status()}, {ran}")
        registry = FailedJobRegistry(queue=queue)
        ok = failing.get_status(refresh=True) == "failed" and failing.id in registry.get_job_ids()
        report("rq failing job lands in the failed registry", ok, f"status {failing.get_status()}")
    finally:
        stop(worker)


def celery_checks(logdir):
    worker = start([os.path.join(BIN, "celery"), "-A", "jobs", "worker", "--concurrency", "2",
                    "--loglevel", "INFO"], os.path.join(logdir, f"celery-worker-{NAME}.log"))
    try:
        pending = [jobs.multiply.delay(i, 3) for i in range(100)]
        try:
            values = [r.get(timeout=60) for r in pending]
            wrong = [i for i, v in enumerate(values) if v != i * 3]
            report("celery 100 task results", not wrong, f"{len(wrong)} wrong" if wrong else "")
        except Exception as e:  # Any failure to fetch is the check failing.
            report("celery 100 task results", False, repr(e))
    finally:
        stop(worker)


def main():
    logdir = sys.argv[3] if len(sys.argv) > 3 else HERE
    for group in (rq_checks, celery_checks):
        try:
            group(logdir)
        except Exception as e:  # A crash in a group fails it, the run goes on.
            report(group.__name__, False, repr(e))
    passed = sum(results)
    print(f"SUMMARY {NAME} {passed}/{len(results)} checks passed", flush=True)
    sys.exit(0 if passed == len(results) and results else 1)


if __name__ == "__main__":
    main()

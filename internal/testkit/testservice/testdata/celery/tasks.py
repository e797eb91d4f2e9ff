"""A Celery app of the kind users already run, for queue's tests: its task
calls the simulated model over HTTP. $TARE_TEST_BROKER is the broker
(redis:// or amqp://) and $TARE_TEST_BACKEND the result backend (the
broker when unset); $TARE_TEST_TRACK_STARTED=0 leaves task_track_started
off, as Celery's default is."""
import os
import sys

from celery import Celery

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import model  # noqa: E402

broker = os.environ["TARE_TEST_BROKER"]
app = Celery("tasks", broker=broker, backend=os.environ.get("TARE_TEST_BACKEND") or broker)
app.conf.task_track_started = os.environ.get("TARE_TEST_TRACK_STARTED", "1") == "1"
app.conf.broker_connection_retry_on_startup = True


@app.task
def answer(seq, prompt="hello"):
    return {"seq": seq, "tokens": model.complete(prompt)}


@app.task
def boom(seq, prompt=""):
    raise ValueError("boom %s" % seq)

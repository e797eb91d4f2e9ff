"""RQ functions of the kind users already run, for queue's tests: answer
calls the simulated model over HTTP ($TARE_TEST_MODEL)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import model  # noqa: E402


def answer(seq, prompt="hello"):
    return {"seq": seq, "tokens": model.complete(prompt)}


def boom(seq, prompt=""):
    raise ValueError("boom %s" % seq)

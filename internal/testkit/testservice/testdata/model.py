"""The call every test task makes: one completion from the simulated
model (tare model, or modelsim on loopback) named by $TARE_TEST_MODEL."""
import json
import os
import urllib.request

# Loopback only: no proxy from the environment.
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def complete(prompt, max_tokens=8):
    body = json.dumps({
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "stream": False,
    }).encode()
    req = urllib.request.Request(os.environ["TARE_TEST_MODEL"] + "/v1/chat/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    with _opener.open(req, timeout=30) as resp:
        answer = json.load(resp)
    return answer["usage"]["completion_tokens"]

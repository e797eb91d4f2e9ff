package scenario

// Pausing is a Python service of one gunicorn sync worker whose handler
// pauses now and then: every 200–600 ms (at random) one request holds
// the worker 30–100 ms, half the time spinning on the CPU (a collection,
// a cache rebuilt) and half the time asleep (a lock, a flush), and the
// requests behind it wait their turn. Nothing else runs: every slow
// request is the code's own.
func Pausing() Deployment { return gunicornTCP(pausingApp, "-w", "1") }

// pausingApp is the WSGI app of Pausing: about 0.5 ms of CPU a request,
// and the pauses. The draws are seeded, so every run pauses alike.
const pausingApp = `
import random, time
draw = random.Random(39)
next_pause = None

def app(environ, start_response):
    global next_pause
    now = time.monotonic()
    if next_pause is None:
        next_pause = now + draw.uniform(0.2, 0.6)
    if now >= next_pause:
        pause = draw.uniform(0.03, 0.1)
        if draw.random() < 0.5:
            end = now + pause
            while time.monotonic() < end:
                pass
        else:
            time.sleep(pause)
        next_pause = time.monotonic() + draw.uniform(0.2, 0.6)
    s = 0
    for i in range(5000):
        s += i * i
    start_response('200 OK', [('Content-Type', 'text/plain')])
    return [b'ok\n']
`

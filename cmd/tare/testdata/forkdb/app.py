"""A threaded HTTP app that opens a fresh PostgreSQL connection for each
request, so that the server forks a backend per request, which exits
when the request is done: what a pool-less app does, and what php-fpm's
ondemand children, Apache's prefork children and CGI look like to a host.

    /usr/bin/python3 app.py DSN

It listens on a free loopback port and prints "ready PORT" once it has
answered a query of its own, or the error and exits 1. At most MAX_DB
requests hold a connection at once, so that it cannot take every
connection of a server other tests share; a request that waits more
than 2 s for one answers 503.
"""

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psycopg2

DSN = sys.argv[1]
MAX_DB = 6
QUERY = "SELECT sum(i) FROM generate_series(1, 100000) AS i"
slots = threading.BoundedSemaphore(MAX_DB)


def query():
    conn = psycopg2.connect(DSN)
    try:
        cur = conn.cursor()
        cur.execute(QUERY)
        return str(cur.fetchone()[0]).encode()
    finally:
        conn.close()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        if not slots.acquire(timeout=2):
            self.answer(503, b"busy")
            return
        try:
            body = query()
        finally:
            slots.release()
        self.answer(200, body)

    def answer(self, status, body):
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    try:
        query()
    except psycopg2.Error as e:
        print("no PostgreSQL at the DSN:", e, flush=True)
        sys.exit(1)
    ThreadingHTTPServer.daemon_threads = True
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print("ready", server.server_address[1], flush=True)
    server.serve_forever()


main()

"""gunicorn settings of Headway's web server (``make serve``, ``make demo``, the Docker image).

Threads, not processes, hold the long requests: each SDK keeps a preemption long-poll open
(``GET trials/{id}/preempt/?timeout=60``), so a server needs one free thread per running trial
plus some for the dashboard. gthread workers (256 threads each) held 200 such polls while the
dashboard stayed fast (bench/serving.py, docs/deployment.md); sync workers hold one request each.
"""

from config.env import envint, envstr

bind = [f"{envstr('HEADWAY_BIND', '127.0.0.1')}:{envint('HEADWAY_PORT', 8000)}"]
# gthread, with a kept-alive connection's next request served by the thread that answered it.
worker_class = "config.gunicorn_worker.FollowUpThreadWorker"
workers = envint("HEADWAY_WEB_WORKERS", 2)
# A worker queues connections beyond its threads (they wait for a free one), and connections are
# not spread evenly over workers: size threads per worker for all long-polls, not workers x threads.
threads = envint("HEADWAY_WEB_THREADS", 256)
# gthread workers heartbeat from their main loop, so a 60 s long-poll is no "worker timeout".
timeout = 120
graceful_timeout = 30
keepalive = 5
# Import Django once in the master: workers answer their first request at once (and share pages).
preload_app = True
# Requests are logged by Django at WARNING and above; gunicorn's own messages to stderr.
accesslog = None
errorlog = "-"
loglevel = envstr("LOG_LEVEL", "INFO").lower()

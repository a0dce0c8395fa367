"""Redis as jury's broker: the one client factory (redis_client), task messages written
straight onto the queues (wire), parked tasks (parking), and the kombu transport the workers
take messages with (transport).
"""

"""What a call may spend: cluster-wide rate limits (ratelimit: the interface and the in-memory
limiter; redis_limiter: the Redis one), putting each call through them (gating), and the batch
budget (budget).
"""

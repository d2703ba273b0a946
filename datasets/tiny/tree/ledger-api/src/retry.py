"""Webhook retry schedule."""


def backoff_delays(base: float = 1.0, attempts: int = 8, cap: float = 300.0) -> list[float]:
    # jittered schedule replaced the fixed 2 s / 5 attempts one in August
    return [min(cap, base * 3 ** i) for i in range(attempts)]

"""Per-API-key token bucket in Redis. Limits come from settings, per plan."""
import time

from fastapi import HTTPException, Request

from harbor.settings import settings
from harbor.redis import ratelimit_client


def limit_for(plan: str) -> int:
    """Requests per minute for a plan; unknown plans get the default."""
    return settings.ratelimit_per_plan.get(plan, settings.ratelimit_default)


async def enforce(request: Request) -> None:
    key = request.state.api_key
    per_minute = limit_for(key.plan)
    bucket = f"rl:{key.id}:{int(time.time() // 60)}"
    count = await ratelimit_client.incr(bucket)
    if count == 1:
        await ratelimit_client.expire(bucket, 61)
    if count > per_minute:
        retry_after = 60 - int(time.time()) % 60
        raise HTTPException(429, headers={"Retry-After": str(retry_after)})

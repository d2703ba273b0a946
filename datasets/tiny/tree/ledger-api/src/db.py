"""Connection pool for the ledger store (asyncpg, PostgreSQL 16)."""
import asyncpg

POOL_MIN, POOL_MAX = 2, 20


async def create_pool(dsn: str) -> asyncpg.Pool:
    return await asyncpg.create_pool(dsn, min_size=POOL_MIN, max_size=POOL_MAX)

"""Double-entry posting: the only write path into the ledger."""
from decimal import Decimal


async def post_journal_entry(conn, lines: list[tuple[str, Decimal]]) -> None:
    if sum(amount for _, amount in lines) != 0:
        raise ValueError("journal entry does not balance")
    async with conn.transaction():
        await conn.executemany("INSERT INTO postings(account, amount) VALUES ($1, $2)", lines)

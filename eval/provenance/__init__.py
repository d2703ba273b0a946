"""Stage 1, provenance: what a computation depends on (its code closure) and the stamp a report records."""

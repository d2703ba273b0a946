"""Stage 6, experiments: one spec end to end, from datasets to per-query metrics and statistics."""

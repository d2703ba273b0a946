"""Stage 2, execution: where the harness's tasks run (this process or a Dask cluster)."""

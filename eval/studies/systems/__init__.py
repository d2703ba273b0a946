"""Memory systems under test (issue 40): any system that can ``ingest`` a scope's memories
and ``recall`` ranked ids is put through the harness's own measurements (ranx metrics and
field measures, bootstrap CIs, paired tests with Holm, tie rates, trivial-cutoff counts),
beside memofs' reference pipeline.

* :mod:`.base`: the interface (:class:`~.base.System`) and what a call returns;
* :mod:`.config`: a systems spec (TOML) and the adapter registry;
* :mod:`.run`: one system through a dataset, every call timed and guarded;
* :mod:`.compare`: the runs through the harness's metrics and statistics;
* :mod:`.report`: markdown and CSV; ``python -m memofs_eval.studies.systems`` writes them;
* adapters: :mod:`.memofs_library`, :mod:`.memofs_store` (CLI and MCP), :mod:`.mcp_client`
  (any MCP server through a declared tool mapping), :mod:`.run_file`, :mod:`.lancedb_system`,
  :mod:`.chroma_system`.
"""

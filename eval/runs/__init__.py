"""Stage 4, runs: embedders, cached signal frames, runs recombined with the pipeline's own fusion, peers, tuning."""

"""Stage 5, scoring: ranx metrics, the harness's own measures, statistics, tie rates, the CI gate, attribution."""

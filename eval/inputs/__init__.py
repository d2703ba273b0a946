"""Stage 3, inputs: experiment specs, datasets by loader, query folds and measure names."""

"""Dataset format, bundled datasets and public-benchmark loaders (installed as ``memofs_datasets``)."""

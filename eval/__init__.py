"""The memofs evaluation harness (installed as ``memofs_eval`` from ``eval/``)."""

"""Stage 7, reporting: report files, the README's generated blocks, the notebooks' API and their headless run."""

"""``python -m memofs``: the CLI (:mod:`memofs.surfaces.cli`)."""

from memofs.surfaces.cli import main

if __name__ == "__main__":
    main()

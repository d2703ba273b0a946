"""Stage 8, studies: the learned-fusion study, the supersession sweep, and memory systems under test."""

"""Text: stop words, the recall tokenizer, the task lexicon and task-aware query rewriting.
The bottom of the pipeline: imports nothing else from memofs."""

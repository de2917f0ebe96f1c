"""One pass per file; `lowering.pipeline` puts them in order."""

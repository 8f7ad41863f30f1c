# journal/: fragment owned by the journal module (see journal/README.md).

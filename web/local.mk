# web/: fragment owned by the web module (see web/README.md).

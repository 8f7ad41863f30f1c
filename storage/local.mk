# storage/: fragment owned by the storage module (see storage/README.md).

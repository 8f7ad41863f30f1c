# engine/: fragment owned by the engine module (see engine/README.md).

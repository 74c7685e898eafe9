"""The deterministic simulator: node cores on a virtual clock, one seeded random source,
an in-memory network and disk, nemeses and clients. Same seed, same history, byte for byte."""

"""The deterministic simulator: node cores on a virtual clock, one seeded random source,
an in-memory network and disk, nemeses and clients. Same seed, same history, byte for byte.

`cluster.Simulation` is the simulated cluster, `runtime.SimRuntime` runs a test's phases on it (the
`harness.core.runtime.Runtime` port of `harness.core.run.run_test`), `runs` runs, stores and reloads them."""

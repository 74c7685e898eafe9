"""Control side of kraftwerk: clusters, nemeses, generators, runner, store, reports and the CLI."""

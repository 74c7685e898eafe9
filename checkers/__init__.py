"""History model and I/O, linearizability, epoch/leader safety, queue anomalies, stats."""

"""Tools over stored runs: replay, shrink, suites and the Spark fleet."""

"""Systems under test: the DB protocol (`harness.db.protocol`) and its adapters (`harness.db.nodes`: our nodes)."""

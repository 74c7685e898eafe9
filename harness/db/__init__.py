"""Systems under test: the DB protocol (`protocol`), the registry of DBs (`registry`), their shared scaffolding
(`base`), and the DBs: our nodes (`kraftwerk`, `nodes`) and etcd (`etcd`)."""

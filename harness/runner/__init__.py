"""The real-cluster runner: `kraftwerk test --backend docker|netns|local|ssh`.

- `generator`   Jepsen-style generator combinators (pure values: mix, stagger, time_limit, phases, …)
- `interpreter` drives a generator in real time with asyncio: client workers, the nemesis worker,
                the history (Recorder, flushed as it happens), crashed processes → process + concurrency
- `workload`    client factory + generator + final reads + checker model (register; queue plugs in later)
- `nemesis`     the nemesis interpreter (harness.nemesis.interpreter) over RealFaults, as the interpreter's
                nemesis handler: "leader" asked of the nodes when an event needs it
- `ssh`         the ssh backend (docker, netns and local are in harness.backends; every backend is
                named in harness.backends.registry; the DB — our nodes — is harness.db.nodes)
- `progress`    the live status line on stderr
- `run`         one whole test: hosts → nodes → phases → collect → teardown → check

`python -m harness.runner down|leftovers` removes / lists what crashed runs left on any backend.
"""

"""The real-cluster runner: `kraftwerk test --backend docker|netns|local|ssh`.

- `generator`   Jepsen-style generator combinators (pure values: mix, stagger, time_limit, phases, …)
- `interpreter` drives a generator in real time with asyncio: client workers, the nemesis worker,
                the history (Recorder, flushed as it happens), crashed processes → process + concurrency
- `workload`    client factory + generator + final reads + checker model (register; queue plugs in later)
- `db`          node.properties, node daemons, readiness via AdminDescribe, log collection
- `nemesis`     the seeded schedule's events on real hosts (RealNemesis), "leader" resolved when fired
- `local`, `ssh` the two backends that live here (docker and netns are in harness.backends)
- `progress`    the live status line on stderr
- `run`         one whole test: hosts → nodes → phases → collect → teardown → check

`python -m harness.runner down|leftovers` removes / lists what crashed runs left on any backend.
"""

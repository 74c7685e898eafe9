"""The real-cluster runtime: `kraftwerk test --backend docker|netns|local|ssh`.

- `run`          `RealRuntime`: hosts, DB and nemesis as the `Runtime` port over which `harness.core.run.run_test`
                 runs a test's phases (hosts → DB → phases → collect → teardown), and `run_real`, one whole test
- `interpreter`  drives a generator in real time with asyncio (client workers, the nemesis worker, the history)
- `nemesis`      the nemesis interpreter over the real `Faults` (`faults/`), as the interpreter's nemesis handler
- `faults/`      the real `Faults` port: partitions (iptables), processes, clocks (libfaketime, clocktrace),
                 packets (netem or the NFQUEUE shaper), disks
- `backends/`    where hosts come from (docker, netns, local; `ssh` here); `backends.registry` names them all
- `control/`     how commands reach a host (a long-lived agent per node, docker exec, ssh)
- `workload`     the workload of a real run; `progress` the live status line on stderr
- `image`        the offline node image; `cluster_local`, `cluster_remote` long-lived clusters (`kraftwerk cluster`)

`python -m harness.real.backends down|leftovers` (or `kraftwerk cluster down`) removes or lists what crashed
runs left on any backend.
"""

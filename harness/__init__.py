"""Control side of kraftwerk: everything that runs a test.

- `core`      the test core: `TestSpec`, named random streams, the operation interpreter, the recorder,
              the one phase orchestration and the judging of a run
- `nemesis`   fault schedules, partition shapes and the nemesis interpreter over the `Faults` port
- `sim`       the deterministic simulator runtime
- `real`      the real-cluster runtime: runner, backends (docker, netns, local, ssh), control agents,
              the real `Faults` implementations, long-lived clusters
- `db`        systems under test: the DB protocol, the DB registry, our nodes and etcd
- `store`     the run store, summaries, reports and `serve`
- `tools`     what works over stored runs: replay, shrink, suites, the Spark fleet
- `commands`  one thin module per `kraftwerk` verb; `cli` is their table
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository (or install) root: holds nodes/, docker/, …

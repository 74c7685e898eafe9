"""A child harness process for the interrupt tests: inject faults, say READY, wait to be interrupted.

    python -m tests.harness.real.backends.child_harness own KIND [IMAGE]   create a cluster itself, fault it
    python -m tests.harness.real.backends.child_harness attach HOSTS_JSON  fault hosts someone else owns

Prints one JSON line ({"cluster": id} or {}) and then READY once every fault is active.
"""

from __future__ import annotations

import json
import sys
import time

from harness.real.faults import RealNemesis
from tests.harness.real.backends import clusters


def fault(hosts, nemesis: RealNemesis) -> None:  # noqa: ANN001
    for h in hosts:
        clusters.start_probe(h, nemesis.clock.env(h))
    names = [h.name for h in hosts]
    nemesis.invoke({"f": "start-partition", "value": {"grudge": {names[0]: names[1:]}}})
    nemesis.invoke({"f": "bump-clock", "value": {names[1]: {"delta-ms": 60_000}}})
    nemesis.invoke({"f": "strobe-clock", "value": {names[0]: {"delta-ms": 500, "period-ms": 100, "duration-s": 600}}})
    nemesis.invoke({"f": "start-packet", "value": {"behaviours": {"loss": {"percent": 50}}, "nodes": names[1:]}})
    nemesis.invoke({"f": "pause", "value": [names[-1]]})


def main(argv: list[str]) -> int:
    mode = argv[0]
    if mode == "own":
        kind = argv[1]
        backend = clusters.make_backend(kind, argv[2] if len(argv) > 2 else None)
        with backend:
            hosts = backend.create(3)
            print(json.dumps({"cluster": backend.cluster_id}), flush=True)
            with RealNemesis(hosts, daemons=clusters.probe_spec) as nemesis:
                fault(hosts, nemesis)
                print("READY", flush=True)
                while True:
                    time.sleep(1)
    hosts = clusters.hosts_from_records(json.loads(argv[1]))
    print("{}", flush=True)
    with RealNemesis(hosts, daemons=clusters.probe_spec) as nemesis:
        fault(hosts, nemesis)
        print("READY", flush=True)
        while True:
            time.sleep(1)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

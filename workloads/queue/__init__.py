"""The queue workload: clients send unique values to a Kafka-style log and poll them back.

As Jepsen's Kafka workload (docs/formats.md "Queue ops"): one partition is one key (`t0-2`), `send`
appends a unique value, `poll` reads from the process's position, `assign` replaces the process's
partitions and resets its positions to the beginning. Written once for every runtime: the
generator, the sans-IO client (`QueueClient`: an operation in, requests out; answers in, a
completion out), the setup that creates the topic and the final drain. Its history is judged by
model `queue` (`checkers.queue`); with ``--txn``, by model ``txn-queue`` (`checkers.txn_queue`).

The modules, one concern each:

- `workload`: `QueueWorkload` (options, phases, the client state it keeps per process and thread);
- `ops`: the main phase's operations (`QueueGenerator`);
- `client`: `QueueClient`, one per worker process, made of the mixins below on `client_base`;
- `producer`: sends, and the idempotent producer of acks=all;
- `consumer`: polls of one partition, KIP-320 fetch rules, and the final drain;
- `groups`: ``--sub-via subscribe``: group membership, polls of the group's partitions, commits;
- `transactions`: ``--txn``: the transactional producer and the transactions;
- `setup`: creating the topic and waiting until it is led;
- `bodies`: the request and reply bodies a transport translates to the system under test;
- `state`: the client state the workload keeps per process and thread, and `QueueState`, what the
  modules above use of the workload (they do not import `workload`, which imports them);
- `topic` and `errors`: the topic's keys and values, the Kafka error codes several paths read.

This package exports the workload's public API; the rest is imported from the module that defines it.
"""

from workloads.queue.topic import TOPIC, keys
from workloads.queue.workload import ACKS, MODEL, NAME, SUB_VIA, TXN_MODEL, QueueWorkload

__all__ = ["ACKS", "MODEL", "NAME", "SUB_VIA", "TOPIC", "TXN_MODEL", "QueueWorkload", "keys"]

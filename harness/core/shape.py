"""The cluster's shape: which nodes are quorum voters (controllers) and which serve clients (brokers).

One value read by every part that lays a cluster out: the simulator (which core each node runs, the voter set,
which nodes the workload's clients talk to), the nemesis (the `controllers` and `brokers` targets), and the real
DB's node.properties (`process.roles`, `controller.quorum.voters`). It comes from the test's `--controllers N`
and `--controller-roles` options (`TestSpec.shape`).

    controllers 0 (the default): every node is a voter and a broker, as before the option existed;
    controllers N, roles dedicated: n1..nN are voters running the controller role only, the rest are
        broker-only observers of the quorum (Kafka's process.roles=controller / process.roles=broker);
    controllers N, roles combined: n1..nN are voters that are also brokers, the rest broker-only observers.
"""

from __future__ import annotations

from dataclasses import dataclass

DEDICATED = "dedicated"
COMBINED = "combined"
CONTROLLER_ROLES = (DEDICATED, COMBINED)

# the nemesis targets a shape names (harness.nemesis.interpreter), besides "leader", "all" and node names
CONTROLLERS = "controllers"
BROKERS = "brokers"
ACTIVE_CONTROLLER = "active-controller"  # the quorum leader, resolved when the fault fires
GROUPS = (CONTROLLERS, BROKERS)


@dataclass(frozen=True)
class Shape:
    """A cluster of `nodes` nodes n1.. laid out by `controllers` (0: every node a combined voter) and `roles`."""

    nodes: int
    controllers: int = 0
    roles: str = DEDICATED

    def problem(self) -> str | None:
        """What is wrong with this shape (naming the option), or None."""
        if self.roles not in CONTROLLER_ROLES:
            return f"--controller-roles must be one of {', '.join(CONTROLLER_ROLES)}, got {self.roles!r}"
        if self.controllers == 0:
            if self.roles != DEDICATED:
                return "--controller-roles needs --controllers N (without it every node is a combined voter)"
            return None
        if not 1 <= self.controllers <= self.nodes:
            return f"--controllers must be between 1 and --nodes ({self.nodes}), got {self.controllers}"
        if self.roles == DEDICATED and self.controllers == self.nodes:
            return (
                f"--controllers {self.controllers} --controller-roles dedicated leaves no broker among "
                f"--nodes {self.nodes} (use fewer controllers, more nodes or --controller-roles combined)"
            )
        return None

    @property
    def separate(self) -> bool:
        """Whether the roles are laid out apart (--controllers given): some node is not a combined voter."""
        return self.controllers > 0

    @property
    def names(self) -> list[str]:
        return [f"n{i}" for i in range(1, self.nodes + 1)]

    @property
    def voter_ids(self) -> list[int]:
        """The quorum's voter set (node ids): the controllers, or every node."""
        return list(range(1, (self.controllers or self.nodes) + 1))

    def is_controller(self, node_id: int) -> bool:
        return not self.separate or node_id in self.voter_ids

    def is_broker(self, node_id: int) -> bool:
        return not (self.roles == DEDICATED and self.separate and self.is_controller(node_id))

    def process_roles(self, node_id: int, brokers: bool = True) -> str:
        """node.properties `process.roles` of node `node_id`; `brokers`: the workload speaks Kafka (else every
        node is a controller, as the register workload's nodes are)."""
        if not brokers:
            return "controller"
        if not self.is_controller(node_id):
            return "broker"
        return "controller,broker" if self.is_broker(node_id) else "controller"

    @property
    def controller_names(self) -> list[str]:
        return [f"n{i}" for i in self.voter_ids]

    @property
    def broker_names(self) -> list[str]:
        return [f"n{i}" for i in range(1, self.nodes + 1) if self.is_broker(i)]

    def record(self) -> dict[str, int | str]:
        """The shape as a state file records it (``kraftwerk cluster``'s DIR/cluster.json "shape")."""
        return {"nodes": self.nodes, "controllers": self.controllers, "roles": self.roles}

    @classmethod
    def from_record(cls, record: object, nodes: int) -> Shape:
        """The shape a state file recorded (`record`); a file written before shapes existed: every node combined."""
        if not isinstance(record, dict):
            return cls(nodes)
        return cls(nodes, int(record.get("controllers", 0)), str(record.get("roles", DEDICATED)))

    def groups(self) -> dict[str, list[str]]:
        """The node groups a nemesis target may name: {"controllers": [...], "brokers": [...]}."""
        return {CONTROLLERS: self.controller_names, BROKERS: self.broker_names}

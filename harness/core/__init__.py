"""The test core: `TestSpec` (every option), named random streams, the operation interpreter and the
recorder, shared by the simulator and the real runtime."""

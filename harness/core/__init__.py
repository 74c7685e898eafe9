"""The test core: `TestSpec` (every option), named random streams, the operation interpreter and the
recorder, shared by the simulator and the real runtime; `run_test` (`run`), which runs a test's phases
(`phases`: their limits) over the `Runtime` port (`runtime`) that both implement, and judges it."""

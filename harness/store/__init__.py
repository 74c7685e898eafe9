"""The run store (`store/<test>/<time>/`): writing runs, terminal summaries, HTML reports and `serve`."""

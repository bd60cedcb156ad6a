"""The lab: what builds and draws networks beside the core -- the torch bridge and the trainer (torch extra), the
architectures searched within a budget, Hypothesis strategies, plots and the dataflow drawing, and the dask sweep
that runs independent jobs. It imports the core only."""

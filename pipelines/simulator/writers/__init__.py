"""Writers of the simulator's output files, one module per source format."""

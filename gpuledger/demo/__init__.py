"""``gpuledger demo`` as a library: simulate a cluster and run it through the whole pipeline."""

"""The training core every family trains through: the loop on Ray Train, its input path,
its metrics, and the benchmark of where a step's time goes."""

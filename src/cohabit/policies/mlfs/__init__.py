"""MLFS (Wang, Liu, Shen, CoNEXT'20): ML-feature task priorities over job DAGs, ideal-virtual-host
placement, overload migration (MLF-H, :mod:`.heuristic`), a learned scheduler trained from the
heuristic (MLF-RL, :mod:`.rl`) and load control by early stopping (MLF-C, :mod:`.control`).
See ``docs/mlfs.md`` for the map from the paper's equations to this code."""

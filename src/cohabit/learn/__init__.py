"""Trainers of learned policies: they run the simulator (the environment) and write the weights
the package ships. Policies never import this package (the trainers may read ground truth)."""

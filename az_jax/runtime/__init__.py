"""The runtime ring: compiles the core on a mesh and drives it from the host (the trainer, the training loop,
checkpoints, metrics, agents, several processes, preemption, accelerator targets and the preflight). It imports the
core and itself, never an outer package (evaluation, engines, frontends, alphago, apps): what those provide reaches it
as arguments."""

"""The log as the commit point (docs/opening.md; bytes in docs/log-objects.md,
"Version 2"): commit records, the committed state they fold into, checkpoints
of every queue's state, and the load of the committed state."""

"""The commands that drive the store: demo, produce (its input ``lines``),
consume, query, inspect, verify, recover, repair, gc and metrics; each module
a command (its ``HELP``, ``add_arguments``, ``run``), as :mod:`tieredstore.cli`
lists them."""

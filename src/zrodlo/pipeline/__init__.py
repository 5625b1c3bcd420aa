"""The DVC pipeline: its params (params.yaml) read, checked together before any stage runs work,
and turned into the flags of the stages' commands where a command takes them otherwise."""

"""Fleet presets of the fake driver as data: one NodeTopology YAML file each (see ``..topology``)."""

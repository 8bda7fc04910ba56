"""The base every other part of the harness stands on: errors, paths, child processes, registries,
fast JSON, atomic file IO and the run's environment (the pinned versions and the machine).

Nothing here imports any other part of draguard.
"""

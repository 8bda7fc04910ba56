"""Benchmarks: ``draguard bench``'s measurements, one module per benchmark family (:mod:`.suite` lists them)."""

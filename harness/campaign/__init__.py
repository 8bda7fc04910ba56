"""Campaigns: what runs many scenarios and combines their results (kill matrix, repeat, parallel,
retarget, the allocation self-check)."""

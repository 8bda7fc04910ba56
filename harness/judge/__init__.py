"""The judge of a run (:mod:`draguard.harness.judge.judge`) and what it watches with
(:mod:`~draguard.harness.judge.observe`, :mod:`~draguard.harness.judge.incremental`)."""

from .judge import CLAIMS_ROUND_GAP, JUDGE_INTERVAL, Judge, JudgedRun, record_breaches

__all__ = ["CLAIMS_ROUND_GAP", "JUDGE_INTERVAL", "Judge", "JudgedRun", "record_breaches"]

"""Claim churn with locust: operations that create and delete gangs, template claims and shared
claims at a target rate, their time to allocation, prepared, Running and fully released, and the
invariants judged during and after the load.

    engine.py      run_load(): template, the locust process, invariants, summary.json
    locustmain.py  the locust process (local runner, or master plus workers here and elsewhere), and a worker
    users.py       the locust users (imported only in the locust process)
"""

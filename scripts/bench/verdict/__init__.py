"""The GPU verdict's stages, scheduler and bookkeeping, behind its two entry points
(bench_verdict.py: a call per batch of stages; lease.py: the whole verdict in one call
of a lent GPU). One module per concern:

    ledger.py       the results folder, the budget, the kernel table, running a command
    state.py        stages.json, read strictly, written atomically
    procs.py        each stage's processes in a group of their own, none outliving the call
    watchdog.py     kills the groups a verdict killed with -9 left behind
    machine.py      the preflight and the build
    correctness.py  the CUDA tests, compute-sanitizer, the parity runs
    timing.py       the step benchmarks, the kernels in GB/s, the GPU demo
    profile.py      the step's device time by kernel and category
    pytorch.py      the same step in plain PyTorch, eager and compiled
    sizes.py        the device's sizes and the dry run's
    schedule.py     the stages in order of their needs, run within the budget; the exit code
    report.py       the summary, the table, the bundle
    plan.py         the kernel table's rows as the verdict's plan; a results folder as the table reads it
    cli.py          the options both entry points share
"""

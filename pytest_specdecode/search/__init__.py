"""``--dflash-search``: choose the next config from the results so far (Optuna ask/tell).

The tests of every config of the space are collected as a sweep's are; at run
time :mod:`.loop` starts the configs the optimiser (:mod:`.optimizer`) asks
for, feeds back each config's objective (:mod:`.objective`) and skips the
configs it never visits.
"""

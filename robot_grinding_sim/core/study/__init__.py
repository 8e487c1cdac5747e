"""Studies: many independent grinding jobs (parts x cell parameters x plan options), one table.

A study file (:mod:`.spec`) names parts and a grid or list of cell parameters; it expands into
jobs, each one in-process grinding job (:func:`~robot_grinding_sim.core.job.run.run_job`) keyed by
a hash of its inputs and of the package's code (:mod:`.keys`). :mod:`.worker` runs one job and
returns its figures and files; :mod:`.driver` runs the jobs that have no result yet on a worker
pool (:mod:`.pools`: in process, a process pool; :mod:`.ray_pool`: Ray, locally or on a
cluster), stores each result as it arrives and writes the results table (:mod:`.table`) and the
plots across the study (:mod:`.plots`). Nothing here imports Ray except :mod:`.ray_pool`.
"""

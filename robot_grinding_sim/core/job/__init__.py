"""The in-process grinding job: what it loads (setup), the run over the coupled step (run), the
force-target optimisation (optimise), the plan a cell executes (plan_job), and the job's outputs
(outputs, the removal map, the viewer's topics). The configuration is core.config; the physics
step is core.sim.
"""

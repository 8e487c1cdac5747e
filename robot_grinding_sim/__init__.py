"""robot_grinding_sim: simulated and physical robotic grinding.

The package splits into a ROS-free core (``core``, ``hardware``) and thin ROS 2 adapters
(``ros``, ``nodes``). Importing this package imports nothing heavy and nothing from ROS; in a node
process it first takes over SIGINT/SIGTERM (:mod:`robot_grinding_sim.ros.early_signals`: the
earliest point a node's console script reaches, so a Ctrl-C during its imports ends it with 0),
then chooses where numba caches the compiled kernels (:mod:`robot_grinding_sim.core.numba_cache`:
a read-only install caches in the user's folder), before anything imports numba.
"""

from robot_grinding_sim.ros.early_signals import install_if_node_process as _install_if_node_process

_install_if_node_process()

from robot_grinding_sim.core.numba_cache import configure as _configure_numba_cache  # noqa: E402

_configure_numba_cache()

__version__ = "0.1.0"

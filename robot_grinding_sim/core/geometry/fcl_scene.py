"""python-fcl in the collision scene: the broad phase, and the narrow phase of the pairs that have
no exact formula (mesh-mesh, box-mesh on an edge, ...).

:class:`FclBroadPhase` keeps fcl's dynamic AABB tree over a scene's objects, pushes their poses
to fcl lazily (only fcl queries need them) and finds the scene's objects back from the wrappers
fcl's callback hands out. :func:`fcl_contacts`, :func:`fcl_distance` and :func:`fcl_overlaps`
are fcl's narrow phase in the scene's conventions (see
:mod:`~robot_grinding_sim.core.geometry.collision`); their contacts are flagged ``exact=False``.
Callers :meth:`FclBroadPhase.sync` the objects first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import fcl
import numpy as np

from robot_grinding_sim.core.geometry.collision_objects import MESH, Contact, FloatArray, SceneObject


def fcl_signature(fobj: Any) -> tuple:
    """How the broad phase's callback names an fcl object.

    python-fcl hands the callback fresh wrapper objects, without a way back to ours; the node
    type and the pose as fcl stores it identify them (ties are resolved by trying every object
    with that signature: the narrow phase decides).
    """
    return (fobj.getNodeType(), fobj.getTranslation().tobytes(), fobj.getRotation().tobytes())


class FclBroadPhase:
    """python-fcl's dynamic AABB tree (``fcl.DynamicAABBTreeCollisionManager``) over the objects
    of a scene."""

    def __init__(self) -> None:
        self._manager = fcl.DynamicAABBTreeCollisionManager()
        self._ready = False

    def register(self, obj: SceneObject) -> None:
        """Add an object (refitted at the next :meth:`sync`)."""
        self._manager.registerObject(obj.fobj)
        self._ready = False

    def unregister(self, obj: SceneObject) -> None:
        """Remove an object."""
        self._manager.unregisterObject(obj.fobj)
        self._ready = False

    def sync(self, objs: Iterable[SceneObject]) -> None:
        """Push the poses of dirty objects to fcl (lazily: only fcl queries need them)."""
        changed = []
        for obj in objs:
            if obj.dirty:
                T = obj.T
                obj.fobj.setTransform(fcl.Transform(T[:3, :3], T[:3, 3]))
                obj.sig = fcl_signature(obj.fobj)
                obj.dirty = False
                changed.append(obj.fobj)
        if not self._ready:
            # after (un)registering: refit every leaf to its object's current AABB, then rebuild
            self._manager.update()
            self._ready = True
        elif changed:
            self._manager.update(changed)

    def pairs(self, objects: Mapping[str, SceneObject], excluded: set[frozenset[str]],
              a: str | None) -> list[tuple[str, str]]:
        """Pairs whose bounding boxes overlap, excluded ones left out, in the order the objects
        were added: a against every other object (a first), or every pair once (``a`` None)."""
        objs = list(objects.values())
        self.sync(objs)
        by_sig: dict[tuple, list[str]] = {}
        for obj in objs:
            by_sig.setdefault(obj.sig, []).append(obj.name)
        raw: list[tuple[tuple, tuple]] = []

        def callback(o1: Any, o2: Any, data: list) -> bool:
            data.append((fcl_signature(o1), fcl_signature(o2)))
            return False

        if a is None:
            self._manager.collide(raw, callback)
        else:
            self._manager.collide(objects[a].fobj, raw, callback)
        order = {n: k for k, n in enumerate(objects)}
        pairs = set()
        for s1, s2 in raw:
            for n1 in by_sig.get(s1, ()):
                for n2 in by_sig.get(s2, ()):
                    if n1 == n2 or frozenset((n1, n2)) in excluded:
                        continue
                    if a is not None:
                        if a not in (n1, n2):
                            continue
                        pairs.add((a, n2 if n1 == a else n1))
                    else:
                        pairs.add((n1, n2) if order[n1] < order[n2] else (n2, n1))
        return sorted(pairs, key=lambda p: (order[p[0]], order[p[1]]))


def fcl_contacts(A: SceneObject, B: SceneObject, max_contacts: int) -> list[Contact]:
    """python-fcl's contacts of A and B (up to ``max_contacts``), normal from B towards A."""
    req = fcl.CollisionRequest(num_max_contacts=max_contacts, enable_contact=True)
    res = fcl.CollisionResult()
    fcl.collide(A.fobj, B.fobj, req, res)
    out = []
    for c in res.contacts:
        # fcl's normal points from its o1 to its o2; o1 is not always the first argument.
        n = np.asarray(c.normal, dtype=np.float64)
        n = n if c.o1 is B.geom else -n
        norm = float(np.linalg.norm(n))
        n = n / norm if norm > 0.0 else np.array([0.0, 0.0, 1.0])
        out.append(Contact(np.asarray(c.pos, dtype=np.float64), n, abs(float(c.penetration_depth)),
                           A.name, B.name, False))
    return out


def fcl_overlaps(A: SceneObject, B: SceneObject) -> bool:
    """python-fcl's boolean collision test of A and B."""
    return fcl.collide(A.fobj, B.fobj, fcl.CollisionRequest(), fcl.CollisionResult()) > 0


def fcl_distance(A: SceneObject, B: SceneObject) -> tuple[float, FloatArray, FloatArray]:
    """python-fcl's distance of A and B and its nearest points (world), point on A first.

    Returns:
        (d, point_a, point_b); d <= 0 when they collide (fcl gives no depth then: the points are
        fcl's, not meaningful; ask :func:`fcl_contacts` or an exact formula).
    """
    req = fcl.DistanceRequest(enable_nearest_points=True)
    res = fcl.DistanceResult()
    d = float(fcl.distance(A.fobj, B.fobj, req, res))
    p1, p2 = (np.asarray(x, dtype=np.float64).copy() for x in res.nearest_points)
    if d > 0.0 and (A.kind == MESH) != (B.kind == MESH):
        # python-fcl 0.7 shape-mesh distance: (point on the mesh, point on the shape) in
        # world whatever the argument order (pinned by test_collision.py).
        pm, pshape = p1, p2
        return (d, pm, pshape) if A.kind == MESH else (d, pshape, pm)
    return d, p1, p2

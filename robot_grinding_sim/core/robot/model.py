"""URDF loading: from any URDF to the flat serial-chain description the dynamics kernels use.

The XML is read by lxml (strictly: a malformed file is an error, not silently "recovered") and
parsed into links and joints by yourdfpy, a maintained URDF parser. The structural checks
(unknown parents, loops, several roots, unsupported joint types, zero axes, missing inertials on
moving links) are done here, with errors naming the file, the joint or the link.

What a :class:`KinematicChain` is:
- The chain runs from the URDF's root link to ``tip_link``. Its moving joints (revolute,
  continuous, prismatic) are the degrees of freedom, in order root -> tip.
- Every other joint (fixed joints, and moving joints off the chain, which are locked at zero) is
  rigid. Every link is therefore rigidly attached to exactly one "body": the child link of the
  closest moving chain joint above it, or the root (body index -1). Links attached to a body have
  their inertials lumped into it.
- Body ``i``'s frame is the frame of the child link of moving joint ``i``. Joint ``i`` sits at the
  fixed placement ``(R0[i], p0[i])`` in body ``i-1``'s frame (the root link's frame for i=0); at
  q=0 the body frame coincides with the joint frame, and the joint rotates about / slides along
  the unit ``axis[i]`` given in that frame.
- ``<mimic>`` tags are ignored (every moving chain joint is an independent degree of freedom, as in
  Pinocchio's default URDF parser); joint ``<dynamics>`` (damping, friction) is not modelled.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import unquote, urlparse

import numpy as np

from robot_grinding_sim.core.errors import ModelError
from robot_grinding_sim.core.robot.spatial import lump_inertias

#: joint type codes used by the kernels
REVOLUTE = 0
PRISMATIC = 1

_MOVING = {"revolute": REVOLUTE, "continuous": REVOLUTE, "prismatic": PRISMATIC}
_SUPPORTED = set(_MOVING) | {"fixed"}


class CollisionGeometry(NamedTuple):
    """One ``<collision>`` element of a link.

    Attributes:
        link: the link the geometry belongs to.
        kind: "box", "cylinder", "sphere" or "mesh".
        params: box {"size": (3,)}; cylinder {"radius", "length"}; sphere {"radius"};
            mesh {"filename": the URI as written, "scale": (3,)}. Metres.
        origin: 4x4 pose of the geometry in the link frame.
        mesh_path: for meshes, the resolved absolute file path, or None if it could not be found
            (the caller decides whether that is an error); None for primitives.
    """

    link: str
    kind: str
    params: dict[str, Any]
    origin: np.ndarray
    mesh_path: str | None


@dataclass
class KinematicChain:
    """Flat description of a serial chain with lumped inertias (see module docstring).

    Shapes: n = number of moving joints on the chain. Units SI; frames as in the module docstring.
    """

    source: str
    root_link: str
    tip_link: str
    joint_names: list[str]
    joint_kinds: list[str]  # URDF type of each chain joint: revolute, continuous or prismatic
    jtype: np.ndarray  # (n,) int64, REVOLUTE or PRISMATIC
    axis: np.ndarray  # (n, 3) unit axes in the joint frame
    R0: np.ndarray  # (n, 3, 3) joint placement rotation in the parent body frame
    p0: np.ndarray  # (n, 3) joint placement translation in the parent body frame
    mass: np.ndarray  # (n,) lumped body masses (kg)
    com: np.ndarray  # (n, 3) lumped centres of mass in the body frame (m)
    inertia: np.ndarray  # (n, 3, 3) lumped inertia about the centre of mass, body axes (kg m^2)
    lower: np.ndarray  # (n,) position limits (rad or m); -inf for continuous joints
    upper: np.ndarray  # (n,)
    velocity_limits: np.ndarray  # (n,) rad/s or m/s; inf when the URDF gives none
    effort_limits: np.ndarray  # (n,) N m or N; inf when the URDF gives none
    link_names: list[str]  # every link of the tree, root first (all are rigidly attached)
    link_body: dict[str, int]  # link -> body index (-1: attached to the root)
    link_offset: dict[str, np.ndarray]  # link -> 4x4 pose of the link in its body frame
    locked_joints: list[str]  # moving joints off the chain, locked at zero
    collision_geometry: list[CollisionGeometry] = field(default_factory=list)

    @property
    def nq(self) -> int:
        return len(self.joint_names)


def path_from_root(source: str | os.PathLike, link: str) -> list[str] | None:
    """The links on the path from the URDF's root to ``link`` (URDF parent links), root first; None
    when the file cannot be read."""
    from lxml import etree

    try:
        root = etree.parse(str(source)).getroot()
    except (OSError, etree.XMLSyntaxError):
        return None
    parent = {j.find("child").get("link"): j.find("parent").get("link") for j in root.findall("joint")
              if j.find("child") is not None and j.find("parent") is not None}
    out = [link]
    while out[-1] in parent:
        out.append(parent[out[-1]])
    return out[::-1]


# --------------------------------------------------------------------------------------------
# URI resolution


def _ament_prefixes() -> list[Path]:
    out = []
    for var in ("AMENT_PREFIX_PATH", "COLCON_PREFIX_PATH"):
        out += [Path(p) / "share" for p in os.environ.get(var, "").split(os.pathsep) if p]
    out += [Path(p) for p in os.environ.get("ROS_PACKAGE_PATH", "").split(os.pathsep) if p]
    return out


def resolve_uri(
    uri: str, package_dirs: Iterable[str | os.PathLike] = (), base_dir: str | None = None
) -> str | None:
    """Resolve a mesh ``filename`` of a URDF to an existing absolute path, or None.

    - ``package://pkg/rel``: an entry ``pkg=PATH`` of ``package_dirs`` gives ``PATH/rel``; for each
      search directory ``d`` (the other ``package_dirs`` first, then the ament/colcon prefixes'
      ``share`` directories and ROS_PACKAGE_PATH from the environment, then the URDF file's
      ancestors) try ``d/pkg/rel``, ``d/rel`` when ``d`` is named ``pkg``, and the ament share
      layout ``d/share/pkg/rel``.
    - ``file:///abs/path``: that path. ``file://rel`` or a bare relative path: relative to
      ``base_dir`` (the URDF's directory), then to each search directory.
    """
    entries = [os.fspath(d) for d in package_dirs]
    named = [d.split("=", 1) for d in entries if "=" in d]
    dirs = [Path(d) for d in entries if "=" not in d] + _ament_prefixes()
    base = Path(base_dir) if base_dir else None
    candidates: list[Path] = []
    if uri.startswith("package://"):
        rest = uri[len("package://"):]
        pkg, _, rel = rest.partition("/")
        candidates += [Path(path) / rel for name, path in named if name == pkg]
        if base is not None:
            dirs += [base, *base.parents]
        for d in dirs:
            candidates += [d / pkg / rel, d / "share" / pkg / rel]
            if d.name == pkg:
                candidates.append(d / rel)
    else:
        if uri.startswith("file://"):
            parsed = urlparse(uri)
            path = unquote(parsed.netloc + parsed.path)
        else:
            path = uri
        p = Path(path)
        if p.is_absolute():
            candidates.append(p)
        else:
            if base is not None:
                candidates.append(base / p)
            candidates += [d / p for d in dirs]
    for c in candidates:
        if c.is_file():
            return str(c.resolve())
    return None


# --------------------------------------------------------------------------------------------
# parsing


def _parse_robot(xml: bytes, source: str) -> Any:
    from lxml import etree
    from yourdfpy import URDF

    try:
        root = etree.fromstring(xml, parser=etree.XMLParser(remove_blank_text=True, remove_comments=True))
    except etree.XMLSyntaxError as exc:
        raise ModelError(f"URDF {source}: not well-formed XML: {exc}") from exc
    if root.tag != "robot":
        raise ModelError(f"URDF {source}: the root element is <{root.tag}>, expected <robot>")
    for j in root.findall("joint"):
        name = j.get("name", "?")
        for tag in ("parent", "child"):
            el = j.find(tag)
            if el is None or not el.get("link"):
                raise ModelError(f"URDF {source}: joint {name!r} has no <{tag} link=...>")
        if j.get("name") is None:
            raise ModelError(f"URDF {source}: a <joint> has no name attribute")
        if j.get("type") is None:
            raise ModelError(f"URDF {source}: joint {name!r} has no type attribute")
    for link in root.findall("link"):
        if link.get("name") is None:
            raise ModelError(f"URDF {source}: a <link> has no name attribute")
    try:
        return URDF._parse_robot(xml_element=root)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ModelError(f"URDF {source}: cannot parse: {exc}") from exc


def _finite(arr: Any, what: str) -> np.ndarray:
    a = np.asarray(arr, dtype=float)
    if not np.isfinite(a).all():
        raise ModelError(f"{what} is not finite: {a.tolist()}")
    return a


def _limit(limit: Any, attr: str, default: float) -> float:
    v = None if limit is None else getattr(limit, attr)
    return default if v is None else float(v)


def parse_chain(
    xml: bytes | str,
    tip_link: str | None = None,
    package_dirs: Sequence[str | os.PathLike] = (),
    source: str = "<string>",
    base_dir: str | None = None,
) -> KinematicChain:
    """Build a :class:`KinematicChain` from URDF text. See :func:`load_chain`."""
    if isinstance(xml, str):
        xml = xml.encode()
    robot = _parse_robot(xml, source)
    where = f"URDF {source}"

    links = {}
    for link in robot.links:
        if link.name in links:
            raise ModelError(f"{where}: link {link.name!r} is defined twice")
        links[link.name] = link
    if not links:
        raise ModelError(f"{where}: no <link> elements")
    joints = {}
    parent_joint: dict[str, Any] = {}
    children: dict[str, list[Any]] = {name: [] for name in links}
    for j in robot.joints:
        if j.name in joints:
            raise ModelError(f"{where}: joint {j.name!r} is defined twice")
        joints[j.name] = j
        if j.type not in _SUPPORTED:
            if j.type in ("floating", "planar"):
                raise ModelError(
                    f"{where}: joint {j.name!r} is {j.type}; only revolute, continuous, prismatic and "
                    "fixed joints are supported (a fixed-base chain)"
                )
            raise ModelError(f"{where}: joint {j.name!r} has unknown type {j.type!r}")
        for role, name in (("parent", j.parent), ("child", j.child)):
            if name not in links:
                raise ModelError(
                    f"{where}: joint {j.name!r} names {role} link {name!r}, which is not defined"
                )
        if j.child in parent_joint:
            raise ModelError(
                f"{where}: link {j.child!r} is the child of both joint {parent_joint[j.child].name!r} "
                f"and joint {j.name!r} (a kinematic loop; URDF describes trees only)"
            )
        if j.parent == j.child:
            raise ModelError(f"{where}: joint {j.name!r} connects link {j.child!r} to itself (a loop)")
        parent_joint[j.child] = j
        children[j.parent].append(j)

    roots = [name for name in links if name not in parent_joint]
    if not roots:
        raise ModelError(f"{where}: every link has a parent joint: the joints form a kinematic loop")
    if len(roots) > 1:
        raise ModelError(f"{where}: {len(roots)} root links {roots}: the links must form one connected tree")
    root = roots[0]

    # breadth-first order; links never reached sit on a loop
    order = [root]
    depth = {root: 0}
    moving_depth = {root: 0}
    for name in order:
        for j in children[name]:
            depth[j.child] = depth[name] + 1
            moving_depth[j.child] = moving_depth[name] + (j.type in _MOVING)
            order.append(j.child)
    if len(order) != len(links):
        lost = sorted(set(links) - set(order))
        raise ModelError(
            f"{where}: links {lost} are not reachable from root {root!r}: the joints form a loop"
        )

    if tip_link is None:
        tip_link = "tcp" if "tcp" in links else max(order, key=lambda n: (moving_depth[n], depth[n]))
    elif tip_link not in links:
        raise ModelError(f"{where}: tip link {tip_link!r} is not a link of the URDF (links: {sorted(links)})")

    path = []  # joints root -> tip
    name = tip_link
    while name != root:
        path.append(parent_joint[name])
        name = path[-1].parent
    path.reverse()
    chain_joints = [j for j in path if j.type in _MOVING]
    if not chain_joints:
        raise ModelError(f"{where}: the chain from {root!r} to {tip_link!r} has no moving joint")
    chain_index = {j.name: i for i, j in enumerate(chain_joints)}

    n = len(chain_joints)
    jtype = np.zeros(n, dtype=np.int64)
    axis = np.zeros((n, 3))
    R0 = np.zeros((n, 3, 3))
    p0 = np.zeros((n, 3))
    lower, upper = np.full(n, -np.inf), np.full(n, np.inf)
    vel, eff = np.full(n, np.inf), np.full(n, np.inf)
    link_body: dict[str, int] = {root: -1}
    link_offset: dict[str, np.ndarray] = {root: np.eye(4)}
    locked = []
    for name in order[1:]:
        j = parent_joint[name]
        origin = np.eye(4) if j.origin is None else _finite(j.origin, f"{where}: origin of joint {j.name!r}")
        X_b_joint = link_offset[j.parent] @ origin
        if j.name in chain_index:
            i = chain_index[j.name]
            if link_body[j.parent] != i - 1:  # cannot happen for a tree path; guards the kernels
                raise ModelError(f"{where}: internal error ordering joint {j.name!r}")
            a = j.axis if j.axis is not None else (1.0, 0.0, 0.0)
            a = _finite(a, f"{where}: axis of joint {j.name!r}")
            norm = float(np.linalg.norm(a))
            if norm < 1e-12:
                raise ModelError(f"{where}: joint {j.name!r} has a zero axis")
            jtype[i] = _MOVING[j.type]
            axis[i] = a / norm
            R0[i], p0[i] = X_b_joint[:3, :3], X_b_joint[:3, 3]
            if j.type != "continuous":
                lower[i] = _limit(j.limit, "lower", -np.inf)
                upper[i] = _limit(j.limit, "upper", np.inf)
                if lower[i] > upper[i]:
                    raise ModelError(
                        f"{where}: joint {j.name!r} has lower limit {lower[i]} > upper {upper[i]}"
                    )
            vel[i] = abs(_limit(j.limit, "velocity", np.inf)) or np.inf
            eff[i] = abs(_limit(j.limit, "effort", np.inf)) or np.inf
            link_body[name] = i
            link_offset[name] = np.eye(4)
        else:
            if j.type in _MOVING:
                locked.append(j.name)
            link_body[name] = link_body[j.parent]
            link_offset[name] = X_b_joint

    # lump inertials into bodies
    parts: list[list[tuple[float, np.ndarray, np.ndarray]]] = [[] for _ in range(n)]
    for name in order:
        b = link_body[name]
        inertial = links[name].inertial
        if b < 0 or inertial is None:
            continue
        m = inertial.mass if inertial.mass is not None else 0.0
        m = float(_finite(m, f"{where}: mass of link {name!r}"))
        if m < 0:
            raise ModelError(f"{where}: link {name!r} has negative mass {m}")
        inertia = _finite(
            inertial.inertia if inertial.inertia is not None else np.zeros((3, 3)),
            f"{where}: inertia of link {name!r}",
        )
        X = link_offset[name] @ (np.eye(4) if inertial.origin is None else _finite(inertial.origin, "origin"))
        R = X[:3, :3]
        parts[b].append((m, X[:3, 3].copy(), R @ inertia @ R.T))
    mass = np.zeros(n)
    com = np.zeros((n, 3))
    inertia_b = np.zeros((n, 3, 3))
    for i in range(n):
        if not parts[i]:
            child = chain_joints[i].child
            raise ModelError(
                f"{where}: link {child!r}, moved by joint {chain_joints[i].name!r}, has no <inertial> "
                "(nor does anything rigidly attached to it): its dynamics are undefined"
            )
        ms, cs, Is = zip(*parts[i], strict=True)
        mass[i], com[i], inertia_b[i] = lump_inertias(list(ms), list(cs), list(Is))

    geoms = []
    for name in order:
        for c in links[name].collisions:
            geoms.append(_collision(name, c, package_dirs, base_dir, where))

    return KinematicChain(
        source=source,
        root_link=root,
        tip_link=tip_link,
        joint_names=[j.name for j in chain_joints],
        joint_kinds=[j.type for j in chain_joints],
        jtype=jtype,
        axis=axis,
        R0=R0,
        p0=p0,
        mass=mass,
        com=com,
        inertia=inertia_b,
        lower=lower,
        upper=upper,
        velocity_limits=vel,
        effort_limits=eff,
        link_names=list(order),
        link_body=link_body,
        link_offset=link_offset,
        locked_joints=locked,
        collision_geometry=geoms,
    )


def _collision(
    link: str, c: Any, package_dirs: Sequence[Any], base_dir: str | None, where: str
) -> CollisionGeometry:
    origin = np.eye(4)
    if c.origin is not None:
        origin = _finite(c.origin, f"{where}: collision origin of link {link!r}")
    g = c.geometry
    if g is None:
        raise ModelError(f"{where}: a <collision> of link {link!r} has no <geometry>")
    if g.box is not None:
        return CollisionGeometry(link, "box", {"size": _finite(g.box.size, "box size")}, origin, None)
    if g.cylinder is not None:
        params = {"radius": float(g.cylinder.radius), "length": float(g.cylinder.length)}
        return CollisionGeometry(link, "cylinder", params, origin, None)
    if g.sphere is not None:
        return CollisionGeometry(link, "sphere", {"radius": float(g.sphere.radius)}, origin, None)
    if g.mesh is not None:
        scale = g.mesh.scale
        scale = np.ones(3) if scale is None else np.broadcast_to(np.asarray(scale, dtype=float), (3,)).copy()
        path = resolve_uri(g.mesh.filename, package_dirs, base_dir)
        return CollisionGeometry(link, "mesh", {"filename": g.mesh.filename, "scale": scale}, origin, path)
    raise ModelError(f"{where}: a <collision> of link {link!r} has an empty or unknown <geometry>")


def load_chain(
    path: str | os.PathLike, tip_link: str | None = None, package_dirs: Sequence[str | os.PathLike] = ()
) -> KinematicChain:
    """Read a URDF file into a :class:`KinematicChain` from its root link to ``tip_link``.

    Args:
        path: the URDF file.
        tip_link: end of the chain; default ``tcp`` if the URDF has it, else the link below the
            most moving joints (deepest; first in file order on ties).
        package_dirs: search directories for ``package://`` mesh URIs (see :func:`resolve_uri`).

    Raises:
        ModelError: a missing or unreadable file, malformed XML, or a structural problem, with a
            message naming the file and the offending joint or link.
    """
    p = Path(path)
    if not p.is_file():
        what = "does not exist" if not p.exists() else "is not a file"
        raise ModelError(f"URDF file {str(path)!r} {what}")
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ModelError(f"URDF {path}: cannot read: {exc}") from exc
    return parse_chain(data, tip_link, package_dirs, source=str(path), base_dir=str(p.resolve().parent))

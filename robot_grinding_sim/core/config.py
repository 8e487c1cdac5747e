"""Every physical and process parameter of the grinding cell, defined once.

Each group is a frozen dataclass whose fields are declared with
:func:`~robot_grinding_sim.core.parameters.param` (default, description, unit, range). The same
definitions serve:

- the in-process job (``grinding simulate`` / ``demo``) through :class:`CellConfig`;
- the ROS nodes: their parameter schemas are derived with :func:`cell_specs` (names
  ``<group>.<field>``, e.g. ``contact.stiffness``), declared with descriptors and ranges;
- ``config/cell.yaml``, the cell's parameter file that every node loads and ``grinding simulate
  --params`` reads (a test checks that it equals these defaults), and ``grinding check-config``.

Units are SI (REP-103): m, s, N, rad, kg; the unit of each field is in its description. Frames:
poses are in the robot's ``base_link``. This module sits below every domain package (planning,
contact and the nodes take their defaults from it), so it imports nothing of them but the names
of the contact laws (:mod:`~robot_grinding_sim.core.contact.registry`, which loads no law).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from robot_grinding_sim.core.contact import registry as contact_registry
from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.parameters import (
    ParamSpec,
    config_from_values,
    config_values,
    param,
    specs_of,
    validate_params,
)

#: Normal contact laws (contact.model): the registry's (the order is the law id on contact/model).
CONTACT_MODELS = contact_registry.names()
GENERATORS = ("geodesic", "raster", "iso")
ORDERS = ("zigzag", "oneway")


@dataclass(frozen=True)
class RobotConfig:
    """The arm: its URDF and its start configuration."""

    description_file: str = param("", "URDF of arm, F/T sensor and tool; empty: the package's "
                                  "urdf/ur10e_grinding.urdf", path="file")
    home: tuple[float, ...] = param((0.0, -1.2, 1.9, -2.27, -1.57, 0.0), "start configuration of the arm in "
                                    "the URDF's joint order (the simulated arm starts here; IK seeds from it)",
                                    unit="rad", min_length=1, range=(-100.0, 100.0))
    package_dirs: tuple[str, ...] = param((), "where the URDF's package:// URIs resolve: NAME=PATH (package NAME "
                                          "is the directory PATH) or a directory holding packages; searched "
                                          "before AMENT_PREFIX_PATH and ROS_PACKAGE_PATH", type="string_array")


@dataclass(frozen=True)
class WorkpieceConfig:
    """The part and where it is."""

    part: str = param("curved_panel", "built-in part name (`grinding parts`) or a CAD (STEP, IGES, BREP) "
                      "or mesh (STL, PLY, OBJ) file")
    unit: str = param("", "length unit of files that carry none (BREP, meshes); empty: the file's own",
                      choices=("", "m", "mm", "cm", "um", "in", "ft"))
    faces: tuple[int, ...] = param((-1,), "face indices to grind (adjacent faces for the raster generator); "
                                   "[-1]: the largest face looking up", type="int_array", min_length=1,
                                   range=(-1, 100000))
    pose: tuple[float, ...] = param((0.7, 0.0, 0.0, 0.0, 0.0, 0.0), "pose of the part frame in base_link: x y z "
                                    "(m) roll pitch yaw (rad, fixed axes x-y-z)", length=6, range=(-100.0, 100.0))
    link: str = param("", "the link of the URDF the part is fixed to when the robot holds it against a tool "
                      "standing in the cell (the tool's links, tool.tcp_link among them, fixed to the root link); "
                      "empty: the part stands in the cell at workpiece.pose and the robot carries the tool")
    grasp: tuple[float, ...] = param((0.0, 0.0, 0.0, 0.0, 0.0, 0.0), "with workpiece.link: pose of the part frame "
                                     "in that link: x y z (m) roll pitch yaw (rad, fixed axes x-y-z); "
                                     "workpiece.pose is then the frame the plan is written in (the part's "
                                     "nominal pose)", length=6, range=(-100.0, 100.0))
    mass: float = param(-1.0, "with workpiece.link: the held part's mass, carried by the arm's dynamics and "
                        "weighed by an F/T sensor it hangs from; < 0: the part's solid (its CAD volume, or a "
                        "watertight mesh's) times workpiece.density", unit="kg", range=(-1.0, 1000.0))
    com: tuple[float, ...] = param((0.0, 0.0, 0.0), "with workpiece.link and workpiece.mass >= 0: the part's "
                                   "centre of mass in the part frame", unit="m", length=3, range=(-10.0, 10.0))
    inertia: tuple[float, ...] = param((0.0,) * 6, "with workpiece.link and workpiece.mass >= 0: the part's "
                                       "inertia about its centre of mass, part frame axes: ixx ixy ixz iyy iyz izz",
                                       unit="kg m^2", length=6, range=(-1e3, 1e3))
    density: float = param(-1.0, "density of the part's material (its mass from its volume); < 0: that of "
                           "removal.material (aluminium 6061-T6 2,700, AISI 1045 steel 7,870, AISI 304 "
                           "stainless 8,000 kg/m^3, MatWeb)", unit="kg/m^3", range=(-1.0, 1e5))
    deflection: float = param(2e-4, "chordal tolerance of the part's tessellation (contacts of mesh parts; "
                              "broad phase and display of CAD parts)", unit="m", range=(1e-7, 1e-2))
    closed: str = param("auto", "a mesh part is a solid (true, must be watertight), a one-sided surface "
                        "(false) or decided by watertightness (auto)", choices=("auto", "true", "false"))


@dataclass(frozen=True)
class ToolConfig:
    """The grinding tool at the end of the arm (its shape comes from the URDF)."""

    tcp_link: str = param("tcp", "tool centre point link of the URDF: the ball's centre, z out of the tool; tip "
                          "of the arm's chain and frame of the contact wrench")
    link: str = param("abrasive_head", "link of the URDF whose collision geometry (sphere, cylinder or box) is the "
                      "tool; it touches the part by design on contact moves")
    links: tuple[str, ...] = param(("spindle", "abrasive_head"), "links of the tool (tool.link added if missing): "
                                   "on contact moves they may work next to the part (not touch it); every other "
                                   "link keeps the clearance", min_length=1)
    shape: str = param("auto", "the tool's shape (docs/contact.md, tool shapes): ball (a sphere), wheel (a "
                       "cylinder worked on its periphery, axis across the feed), pad (a box worked flat on a "
                       "face), disc (a cylinder worked on its face at tool.face_angle); auto: by the URDF "
                       "primitive (sphere ball, cylinder wheel, box pad)",
                       choices=("auto", "ball", "wheel", "pad", "disc"))
    face_angle: float = param(0.2, "a disc's angle to the surface: its face leans toward the feed by it and its "
                              "rim ahead of the tcp grinds", unit="rad", range=(0.02, 1.2))
    patch_spacing: float = param(0.002, "spacing of the elements over a wheel's width or a pad's face (the "
                                 "Winkler pressure is summed over them)", unit="m", range=(1e-5, 0.1))
    spindle_speed: float = param(10000.0 * 2.0 * math.pi / 60.0, "spindle speed about the tool's z axis "
                                 "(10,000 rpm)", unit="rad/s", range=(0.0, 1e5))


@dataclass(frozen=True)
class ContactConfig:
    """The normal contact law and the tangential grinding force."""

    model: str = param("kelvin_voigt", "normal force law", choices=CONTACT_MODELS)
    stiffness: float = param(1.0e5, "contact stiffness K (Hunt-Crossley family: N/m^exponent); 5 N at "
                             "50 um", unit="N/m", range=(1e-3, 1e12))
    cr: float = param(0.5, "coefficient of restitution realised by the damping (force clamped at >= 0)",
                      range=(0.01, 1.0))
    damping: float = param(-1.0, "Kelvin-Voigt damping D; < 0: from cr and the effective mass",
                           unit="N s/m", range=(-1.0, 1e9))
    exponent: float = param(1.5, "Hunt-Crossley exponent n (1.5: Hertz sphere)", range=(1.0, 3.0))
    v_floor: float = param(1e-3, "Hunt-Crossley: smallest approach speed for alpha", unit="m/s",
                           range=(1e-9, 10.0))
    force_ratio: float = param(0.3, "grinding force ratio Ft/Fn: the tangential force opposes the "
                               "abrasive's sliding velocity", range=(0.0, 10.0))
    slip_speed: float = param(1e-3, "regularisation speed of the tangential force: it is force_ratio Fn |v| / "
                              "sqrt(|v|^2 + slip_speed^2)", unit="m/s", range=(1e-9, 1.0))


@dataclass(frozen=True)
class ServoConfig:
    """The arm's joint position servo: computed torque, Kp = w^2, Kd = 2 zeta w on every joint."""

    bandwidth: float = param(200.0, "servo bandwidth w (natural frequency of the error dynamics)",
                             unit="rad/s", range=(1e-3, 1e4))
    damping_ratio: float = param(1.0, "damping ratio zeta of the error dynamics", range=(0.0, 10.0))
    limit_effort: bool = param(True, "clip motor torques to the URDF effort limits")

    @property
    def kp(self) -> float:
        """Position gain w^2, 1/s^2."""
        return self.bandwidth**2

    @property
    def kd(self) -> float:
        """Velocity gain 2 zeta w, 1/s."""
        return 2.0 * self.damping_ratio * self.bandwidth


@dataclass(frozen=True)
class SimConfig:
    """Time stepping of the simulation."""

    dt: float = param(1e-3, "simulation and control step (the contact is advanced in closed form over it)",
                      unit="s", range=(1e-6, 0.05))
    output_dt: float = param(1e-3, "period of the force samples of the in-process job (taken from the closed "
                             "form inside steps)", unit="s", range=(1e-6, 1.0))
    gravity: tuple[float, ...] = param((0.0, 0.0, -9.81), "gravity in base_link", unit="m/s^2", length=3,
                                       range=(-100.0, 100.0))


@dataclass(frozen=True)
class FTSensorConfig:
    """The simulated force-torque sensor between flange and tool."""

    frame: str = param("ft_sensor", "link of the URDF at the sensor's measuring face (frame of its readings), "
                       "between the flange and tool.tcp_link")
    tool_mass: float = param(-1.0, "mass below the measuring face; < 0: the URDF inertials of the links "
                             "below frame", unit="kg", range=(-1.0, 1000.0))
    tool_com: tuple[float, ...] = param((0.0, 0.0, 0.0), "centre of mass below the measuring face, in frame "
                                        "(used when tool_mass >= 0)", unit="m", length=3, range=(-10.0, 10.0))
    bias: tuple[float, ...] = param((0.0,) * 6, "offset Fx Fy Fz Tx Ty Tz", unit="N, N m", length=6,
                                    range=(-1e4, 1e4))
    noise_std: tuple[float, ...] = param((0.0,) * 6, "white noise standard deviation per channel",
                                         unit="N, N m", length=6, range=(0.0, 1e3))
    cutoff_hz: float = param(0.0, "first-order low-pass cut-off; 0: no filter", unit="Hz", range=(0.0, 1e6))
    seed: int = param(0, "seed of the noise", range=(0, 2**31 - 1))


@dataclass(frozen=True)
class PassParameters:
    """Pass generation on the part's faces."""

    stepover: float = param(0.005, "distance between adjacent passes on the surface", unit="m",
                            range=(1e-5, 1.0))
    spacing: float = param(0.002, "waypoint spacing along a pass (arc length)", unit="m", range=(1e-5, 1.0))
    margin: float = param(0.005, "minimum distance of waypoints from the face boundary and holes", unit="m",
                          range=(0.0, 1.0))
    angle: float = param(0.0, "raster angle about the face normal from the part's x axis", unit="rad",
                         range=(-2.0 * math.pi, 2.0 * math.pi))
    generator: str = param("geodesic", "geodesic (parallel passes a stepover apart measured on the surface, offset "
                           "from the region's boundary: covers any CAD face; a mesh part gets raster), raster "
                           "(plane slicing) or iso (iso-parametric) passes", choices=GENERATORS)
    iso_direction: str = param("u", "iso passes run along u or v", choices=("u", "v"))
    order: str = param("zigzag", "pass order: zigzag (every other pass reversed) or oneway", choices=ORDERS)
    reverse: bool = param(False, "travel the first pass in the opposite direction")
    approach_direction: str = param(
        "auto", "the way the tool comes to the faces, part frame: passes are made where the outward normal n "
        "has n . a >= -0.05. auto: up (+z) where the faces look up, else their mean normal, else the "
        "horizontal from the part to the robot (a wall all round); up; or three numbers 'x y z'; per face "
        "'FACE:DIRECTION' entries separated by ';' (e.g. '3:1 0 0;4:up')")

    def validate(self) -> PassParameters:
        """Check the values (also when built in Python rather than from a parameter file)."""
        _check(self, "passes")
        parse_approach(self.approach_direction)
        return self


def _direction(text: str, name: str) -> tuple[float, float, float] | None:
    """A unit direction from ``auto`` (None), ``up`` or three numbers; InputError naming ``name``."""
    t = text.strip().lower()
    if t == "auto":
        return None
    if t in ("up", "+z", "z"):
        return (0.0, 0.0, 1.0)
    try:
        v = [float(x) for x in t.replace(",", " ").split()]
    except ValueError:
        v = []
    n = math.sqrt(sum(x * x for x in v)) if len(v) == 3 and all(math.isfinite(x) for x in v) else 0.0
    if not n > 0:
        raise InputError(f"parameter '{name}': {text!r} is not a direction (auto, up, or three numbers 'x y z' "
                         "not all zero)")
    return (v[0] / n, v[1] / n, v[2] / n)


def parse_approach(text: str) -> dict[int | None, tuple[float, float, float] | None]:
    """``passes.approach_direction`` as {face index or None (the job's): unit direction (part frame)
    or None (auto)}. Raises InputError naming the parameter."""
    name = "passes.approach_direction"
    out: dict[int | None, tuple[float, float, float] | None] = {None: None}
    for entry in (e for e in str(text).split(";") if e.strip()):
        face, sep, what = entry.partition(":")
        if not sep:
            out[None] = _direction(entry, name)
            continue
        try:
            key = int(face)
        except ValueError:
            raise InputError(f"parameter '{name}': {face.strip()!r} in {entry.strip()!r} is not a face index") \
                from None
        out[key] = _direction(what, name)
    return out


def parse_face_depths(text: str, default: float = 0.0) -> dict[int | None, float]:
    """``removal.face_depths`` ('FACE:DEPTH;...', metres; a bare number is the job's depth) as {face
    index or None (the job's, ``default`` unless the text gives one): depth m}. Raises InputError
    naming the parameter and the entry."""
    name = "removal.face_depths"
    out: dict[int | None, float] = {None: float(default)}
    for entry in (e for e in str(text).split(";") if e.strip()):
        face, sep, what = entry.partition(":")
        key: int | None = None
        if sep:
            try:
                key = int(face)
            except ValueError:
                raise InputError(f"parameter '{name}': {face.strip()!r} in {entry.strip()!r} is not a face index") \
                    from None
            if key < 0:
                raise InputError(f"parameter '{name}': face {key} in {entry.strip()!r} is not a face index")
        try:
            depth = float(what if sep else entry)
        except ValueError:
            depth = math.nan
        if not (math.isfinite(depth) and 0.0 < depth <= 1e-2):
            raise InputError(f"parameter '{name}': {entry.strip()!r}: the depth must be a number of metres in "
                             f"(0, 0.01]")
        if key in out and key is not None:
            raise InputError(f"parameter '{name}': face {key} is given twice")
        out[key] = depth
    return out


@dataclass(frozen=True)
class ProcessConfig:
    """The grinding process: force, feed, tool orientation and the motion around each pass."""

    target_force: float = param(5.0, "normal force wanted on the passes", unit="N", range=(0.0, 1e4))
    feed: float = param(0.01, "TCP speed along the passes", unit="m/s", range=(1e-5, 10.0))
    lead: float = param(0.0, "tool lead angle about the tool y axis", unit="rad", range=(-1.55, 1.55))
    tilt: float = param(0.0, "tool tilt angle about the tool x axis (the travel)", unit="rad", range=(-1.55, 1.55))
    approach: float = param(0.01, "approach and retreat distance along the normal", unit="m", range=(1e-4, 1.0))
    approach_time: float = param(0.6, "duration of the approach (and of the retreat)", unit="s",
                                 range=(1e-3, 60.0))
    engage_gap: float = param(5e-4, "the approach is fast down to this gap above the surface, then slow",
                              unit="m", range=(0.0, 0.1))
    engage_time: float = param(0.4, "duration of the slow engagement onto the commanded penetration", unit="s",
                               range=(1e-3, 60.0))
    dwell: float = param(0.2, "rest at the pass start before the feed starts (the force settles)", unit="s",
                         range=(0.0, 60.0))
    clearance: float = param(0.005, "smallest gap between tool and part on linking moves", unit="m",
                             range=(1e-4, 1.0))
    max_tcp_speed: float = param(0.25, "largest TCP speed of any move: the planner times links (and checks the "
                                 "feed) within it, the executive's move to the start keeps to it, and "
                                 "hardware_driver refuses a command that exceeds it", unit="m/s", range=(1e-3, 10.0))
    lead_in: float = param(0.0, "> 0: the tool is never at rest in contact: the approach ends engage_gap above "
                           "the surface, no dwell, and each pass engages over its first lead_in (force ramped "
                           "while moving at the feed) and releases over its last; 0: approach, engagement and "
                           "dwell at the pass start", unit="m", range=(0.0, 1.0))
    feed_on_surface: bool = param(False, "the feed is the contact point's speed along the surface (the TCP "
                                  "goes faster over convex parts, slower over concave ones) rather than the TCP's")


@dataclass(frozen=True)
class OptimiseConfig:
    """Force-target optimisation of the commanded penetration, pass by pass, by simulation."""

    enabled: bool = param(True, "optimise the per-pass offsets when a robot is simulated")
    tolerance: float = param(0.05, "acceptance: |mean force - target| within this fraction of the target",
                             range=(1e-6, 1.0))
    goal: float = param(0.02, "the optimiser stops below this error (fraction of the target)", range=(1e-6, 1.0))
    max_iterations: int = param(6, "simulations per pass at most", range=(1, 100))


#: Preston coefficients k_p (m^2/N) of the materials removal.material names, with their source:
#: Archard's law per unit area k_p = K / H, abrasive wear coefficient K = 1e-2 (the low end of
#: 1e-2..1e-1, Rabinowicz, Friction and Wear of Materials, 2nd ed., 1995) over the Vickers hardness
#: (MatWeb's data sheets) times 9.807 MPa; docs/contact.md "The Preston coefficient".
PRESTON_MATERIALS: dict[str, tuple[float, str]] = {
    "aluminium": (9.5e-12, "aluminium 6061-T6, HV 107 (MatWeb): K/H = 1e-2 / 1.05 GPa"),
    "steel": (5.4e-12, "AISI 1045 steel, cold drawn, HV 188 (MatWeb): K/H = 1e-2 / 1.84 GPa"),
    "stainless": (7.9e-12, "AISI 304 stainless, annealed, HV 129 (MatWeb): K/H = 1e-2 / 1.27 GPa "
                  "(it work-hardens under the abrasive: calibrate)"),
}


#: densities (kg/m^3) of the materials of removal.material (MatWeb's data sheets of the alloys above):
#: a held part's mass from its volume (workpiece.density < 0)
MATERIAL_DENSITY: dict[str, float] = {"aluminium": 2700.0, "steel": 7870.0, "stainless": 8000.0}


@dataclass(frozen=True)
class RemovalConfig:
    """Material removal by Preston's law (dh/dt = k_p p v) over the ground face, and the depth plan."""

    enabled: bool = param(True, "compute the removal map of the job (in-process job and contact_solver_node)")
    material: str = param("aluminium", "the part's material: its Preston coefficient when preston_coefficient is "
                          "< 0 (aluminium 6061-T6 9.5e-12, AISI 1045 steel 5.4e-12, AISI 304 stainless 7.9e-12 "
                          "m^2/N: K/H with K = 1e-2 over the MatWeb hardness; docs/contact.md)",
                          choices=tuple(PRESTON_MATERIALS))
    preston_coefficient: float = param(-1.0, "Preston coefficient k_p of the part's material with the tool's "
                                       "abrasive; < 0: the material's (aluminium 6061-T6 under a bonded "
                                       "abrasive: Archard's law per unit area k_p = K/H, abrasive wear "
                                       "coefficient K = 1e-2, the low end of 1e-2..1e-1 (Rabinowicz), over the "
                                       "hardness HV 107 = 1.05 GPa (MatWeb), 9.5e-12; docs/contact.md). "
                                       "Calibrate it from a measured groove: grinding calibrate-removal",
                                       unit="m^2/N", range=(-1.0, 1e-6))
    grid_spacing: float = param(2e-4, "spacing of the removal grid on the face (resolve the contact patch: "
                                "about 1.4 mm in radius at 50 um penetration of the 20 mm ball)", unit="m",
                                range=(1e-5, 0.05))
    pressure: str = param("hertz", "pressure over the ball's contact patch: hertz, p0 sqrt(1 - r^2/a^2), or "
                          "uniform", choices=("hertz", "uniform"))
    target_depth: float = param(0.0, "> 0: plan for this removal depth (grinding plan --target-depth): the "
                                "stepover, feed, force and layers are chosen so the predicted removal over the "
                                "region is even at this depth; 0: plan for the force only", unit="m",
                                range=(0.0, 1e-2))
    face_depths: str = param("", "per face target depths when several faces are ground: 'FACE:DEPTH' entries "
                             "separated by ';' (e.g. '3:5e-6;4:1e-5', metres; grinding plan --target-depth "
                             "'3:5e-6;4:1e-5'); faces not named take target_depth. One force and stepover for "
                             "the job, the feed set per face (varied along a pass that crosses faces)")
    hold_force: bool = param(False, "the depth plan keeps process.target_force (the feed is what is left to "
                             "choose); false: it may move the force within [force_min, force_max]")
    stepover_ripple: float = param(0.02, "the depth plan's stepover is the largest at which the summed grooves of "
                                   "the passes vary by at most this fraction about their middle (smaller: more "
                                   "passes, a more even depth)", range=(1e-4, 0.5))
    depth_band: float = param(0.1, "the depth is even when within this fraction of the target depth (the "
                              "uniformity figures count the region inside it)", range=(1e-3, 1.0))
    force_min: float = param(1.0, "the depth plan keeps the force at or above this", unit="N", range=(1e-3, 1e4))
    force_max: float = param(20.0, "the depth plan keeps the force at or below this", unit="N", range=(1e-3, 1e4))
    feed_min: float = param(0.002, "the depth plan keeps the feed at or above this (slower: more layers)",
                            unit="m/s", range=(1e-5, 10.0))
    feed_max: float = param(0.05, "the depth plan keeps the feed at or below this", unit="m/s", range=(1e-5, 10.0))
    cycle_time_max: float = param(0.0, "> 0: the depth plan says so when the job would take longer", unit="s",
                                  range=(0.0, 1e6))

    def depths(self, faces: list[int] | tuple[int, ...] | None = None) -> dict[int | None, float]:
        """{face index or None (the job's): target depth, m} of ``target_depth`` and ``face_depths``
        (:func:`parse_face_depths`); with ``faces``, every face named must be one of them."""
        out = parse_face_depths(self.face_depths, self.target_depth)
        if faces is not None:
            unknown = sorted(k for k in out if k is not None and k not in faces)
            if unknown:
                raise InputError(f"parameter 'removal.face_depths': face {unknown[0]} is not one of the selected "
                                 f"faces {list(faces)}")
        return out

    @property
    def kp(self) -> float:
        """The Preston coefficient in use, m^2/N: preston_coefficient, or the material's when it is < 0."""
        return self.preston_coefficient if self.preston_coefficient >= 0 else PRESTON_MATERIALS[self.material][0]

@dataclass(frozen=True)
class ExecutionConfig:
    """How the executive runs a plan on an arm (simulated or real): timing, supervision, stops."""

    command_lead: float = param(0.5, "commands are stamped this far ahead of the clock, so the arm's controller "
                                "receives them before they start (no jump on a late start)", unit="s",
                                range=(0.0, 10.0))
    tracking_error_limit: float = param(0.05, "largest |measured - commanded| joint position while running; "
                                        "above it the job stops and retreats", unit="rad", range=(1e-5, 3.2))
    ramp_time: float = param(0.3, "pause and resume bring the speed along the plan to 0 / back over this time",
                             unit="s", range=(0.0, 10.0))
    start_tolerance: float = param(1e-3, "an arm farther than this (any joint) from the plan's first knot is "
                                   "first moved there", unit="rad", range=(1e-6, 1.0))
    move_velocity_scale: float = param(0.3, "the move to the plan's start keeps every joint within this "
                                       "fraction of its velocity and acceleration limits", range=(0.01, 1.0))
    joint_states_timeout: float = param(0.5, "while running, no usable joint state (fresh, in order: see "
                                        "max_clock_skew) for longer than this stops the job", unit="s",
                                        range=(0.0, 60.0))
    path_tolerance: float = param(0.5, "largest distance of the tool (TCP) from where the plan puts it, as a "
                                  "fraction of the plan's passes.stepover (beyond half of it the tool grinds "
                                  "the next pass's strip): across the path on the part (approach, dwell, pass, "
                                  "retreat; the force controller's correction along the normal is not counted) "
                                  "the job stops above it; at the plan's end the job is done only within it",
                                  range=(0.01, 10.0))
    settle_time: float = param(1.0, "after the job's last knot, the arm has this long (joint states' stamps) to "
                               "be within path_tolerance of the plan's end; else the job fails", unit="s",
                               range=(0.0, 60.0))
    max_clock_skew: float = param(2.0, "largest |receive time - stamp| of a joint state (this node's clock minus "
                                  "the arm's): a state outside it (clock skew, or delivered late) does not "
                                  "count as alive nor for tracking, and a start is refused naming it (an emulated "
                                  "arm's stamps lag by up to its max_lag, 1 s, on a busy machine)", unit="s",
                                  range=(1e-3, 1e6))


@dataclass(frozen=True)
class AdmittanceConfig:
    """Force control along the surface normal (hardware_driver with force_control; core/robot/admittance.py)."""

    mass: float = param(300.0, "virtual mass M_a of the admittance M_a x'' + D_a x' = F_measured - F_target "
                        "(x: the correction along the outward normal); its pole D_a/M_a filters the F/T noise; 0: "
                        "first order", unit="kg", range=(0.0, 1e7))
    damping: float = param(6.0e4, "virtual damping D_a: with the contact stiffness K in series the force "
                           "settles with the time constant D_a/K (0.6 s at 1e5 N/m, 0.2 s at 3e5) and the loop "
                           "stays stable while K/D_a is well below 1.5/(horizon + the arm's lag) (docs/hardware.md)",
                           unit="N s/m", range=(1.0, 1e9))
    max_correction: float = param(0.002, "bound of |x|, the correction along the normal", unit="m",
                                  range=(0.0, 0.05))
    max_speed: float = param(0.005, "bound of |x'|, the correction's rate (also the rate at which it returns to 0 "
                             "out of contact)", unit="m/s", range=(1e-6, 0.1))
    contact_force: float = param(1.0, "off a pass the law runs only while the normal force exceeds this (and "
                                 "then only lowers the force); below it the correction returns to 0", unit="N",
                                 range=(0.0, 1e3))
    horizon: float = param(0.05, "the corrected command streamed each control period is one point this far "
                           "ahead (the controller blends to it from where its reference is)", unit="s",
                           range=(1e-3, 1.0))


#: The groups of the cell and their parameter prefixes, in file order.
GROUPS: dict[str, type] = {
    "robot": RobotConfig,
    "workpiece": WorkpieceConfig,
    "tool": ToolConfig,
    "contact": ContactConfig,
    "servo": ServoConfig,
    "sim": SimConfig,
    "ft_sensor": FTSensorConfig,
    "passes": PassParameters,
    "process": ProcessConfig,
    "optimise": OptimiseConfig,
    "removal": RemovalConfig,
    "execution": ExecutionConfig,
    "admittance": AdmittanceConfig,
}


@dataclass(frozen=True)
class CellConfig:
    """The whole cell: one instance of every group (defaults: the package's cell)."""

    robot: RobotConfig = dataclasses.field(default_factory=RobotConfig)
    workpiece: WorkpieceConfig = dataclasses.field(default_factory=WorkpieceConfig)
    tool: ToolConfig = dataclasses.field(default_factory=ToolConfig)
    contact: ContactConfig = dataclasses.field(default_factory=ContactConfig)
    servo: ServoConfig = dataclasses.field(default_factory=ServoConfig)
    sim: SimConfig = dataclasses.field(default_factory=SimConfig)
    ft_sensor: FTSensorConfig = dataclasses.field(default_factory=FTSensorConfig)
    passes: PassParameters = dataclasses.field(default_factory=PassParameters)
    process: ProcessConfig = dataclasses.field(default_factory=ProcessConfig)
    optimise: OptimiseConfig = dataclasses.field(default_factory=OptimiseConfig)
    removal: RemovalConfig = dataclasses.field(default_factory=RemovalConfig)
    execution: ExecutionConfig = dataclasses.field(default_factory=ExecutionConfig)
    admittance: AdmittanceConfig = dataclasses.field(default_factory=AdmittanceConfig)

    def values(self) -> dict[str, Any]:
        """Every parameter, ``<group>.<field>`` -> value (arrays as lists)."""
        out: dict[str, Any] = {}
        for g in GROUPS:
            out.update(config_values(getattr(self, g), g))
        return out

    def replace(self, **changes: Any) -> CellConfig:
        """A copy with parameters changed by name: ``cfg.replace(**{"contact.stiffness": 2e5})``;
        values are validated against their specs."""
        specs = {s.name: s for s in cell_specs()}
        unknown = sorted(set(changes) - set(specs))
        if unknown:
            raise InputError(f"unknown parameter {unknown[0]!r} (known: {', '.join(sorted(specs))})")
        return config_from_mapping({**self.values(), **changes})

    def validate(self) -> CellConfig:
        """Check every value against its spec and the cross-parameter rules; returns self."""
        config_from_mapping(self.values())
        return self


def cell_specs(groups: Iterable[str] | None = None) -> list[ParamSpec]:
    """The ParamSpecs of the named groups (default: all), named ``<group>.<field>``."""
    out: list[ParamSpec] = []
    for g in groups if groups is not None else GROUPS:
        if g not in GROUPS:
            raise ValueError(f"unknown configuration group {g!r} (known: {', '.join(GROUPS)})")
        out += specs_of(GROUPS[g], g)
    return out


def _check(obj: Any, prefix: str) -> None:
    validate_params(specs_of(type(obj), prefix), config_values(obj, prefix))


def group_from_values(group: str, values: Mapping[str, Any]) -> Any:
    """One group's dataclass from parameter values named ``<group>.<field>`` (missing: defaults)."""
    return config_from_values(GROUPS[group], values, group)


def config_from_mapping(values: Mapping[str, Any], allow_unknown: bool = False) -> CellConfig:
    """A :class:`CellConfig` from flat parameter values (e.g. a parameter file's ``/**`` section).

    Every value is validated (type, range, choices, length; the message names the parameter);
    missing names take their defaults; unknown names are an error unless ``allow_unknown``.
    Cross-parameter rules: the servo must be stable at the step (computed torque under
    semi-implicit Euler: w dt < 2 (sqrt 2 - 1)), the output period must not be below the step's
    resolution, and the target force must not need a penetration deeper than allowed.
    """
    specs = cell_specs()
    checked = validate_params(specs, values, allow_unknown=allow_unknown)
    cfg = CellConfig(**{g: group_from_values(g, checked) for g in GROUPS})
    w, dt = cfg.servo.bandwidth, cfg.sim.dt
    limit = 2.0 * (math.sqrt(2.0) - 1.0)
    if w * dt >= limit:
        raise InputError(f"parameter 'sim.dt': {dt} s is too long for the servo (servo.bandwidth {w} rad/s): "
                         f"computed torque under semi-implicit Euler needs dt < {limit / w:.4g} s")
    parse_face_depths(cfg.removal.face_depths, cfg.removal.target_depth)
    return cfg


def load_cell_config(paths: Iterable[str], overrides: Mapping[str, Any] | None = None) -> CellConfig:
    """The cell from parameter files (ROS 2 yaml; their ``/**`` sections, later files win) and
    overrides by name. Raises InputError naming the file and the parameter."""
    from robot_grinding_sim.core.parameters import load_params_file

    values: dict[str, Any] = {}
    for path in paths:
        loaded = load_params_file(path)
        known = {s.name for s in cell_specs()}
        unknown = sorted(set(loaded) - known)
        if unknown:
            raise InputError(f"{path}: unknown parameter {unknown[0]!r} for the cell")
        values.update(loaded)
    values.update(overrides or {})
    return config_from_mapping(values)


def cell_yaml(cfg: CellConfig | None = None, header: str = "") -> str:
    """The cell as a ROS 2 parameter file (``/**: ros__parameters:``, one group per block, each value
    commented with its description and unit)."""
    import yaml

    cfg = cfg or CellConfig()
    lines = [f"# {h}" if h else "#" for h in header.splitlines()] if header else []
    lines += ["/**:", "  ros__parameters:"]
    for g, cls in GROUPS.items():
        lines.append(f"    {g}:  # {(cls.__doc__ or '').strip().splitlines()[0]}")
        obj = getattr(cfg, g)
        for spec in specs_of(obj, g):
            key = spec.name.split(".", 1)[1]
            v = getattr(obj, key)
            text = yaml.safe_dump(list(v) if isinstance(v, tuple) else v, default_flow_style=True,
                                  width=1000).strip().removesuffix("...").strip()
            lines.append(f"      {key}: {text}  # {spec.description}")
    return "\n".join(lines) + "\n"

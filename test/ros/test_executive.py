"""grinding_executive as a real process driving dynamics_node (the simulated arm) over DDS.

The plan is a one-pass plan.json written here by the core planner; the checks read it back with
the ``json`` module (not the package's reader): the command the executive sends holds the plan's
knots; the arm, followed through /joint_states, goes through the plan's first and last knots; the
progress covers the pass's arc length; pause brings the arm to rest and resume finishes the job;
stop retreats the tool along the surface normal by the cell's approach distance (the normal the
plan stores, the tool position from the simulated arm's own ~/tool_pose); a tracking limit below
what the arm can do fails the job with the reason; a silent arm fails it too.

The nodes run on dynamics_node's sim time (/clock), as in ``grinding bringup sim``: a busy machine
slows the simulated arm and the executive's clock together. The silent-arm test runs both on the
wall clock instead, so that a stopped arm means stopped joint states, not a stopped clock.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseStamped
from rclpy.qos import DurabilityPolicy, QoSProfile
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory
from visualization_msgs.msg import Marker, MarkerArray

from robot_grinding_sim.ros import conversions as cv

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parents[2]
CELL = REPO / "config" / "cell.yaml"
TRAJ_TOPIC = "/joint_trajectory_controller/joint_trajectory"
SIM = {"use_sim_time": True}
WALL = {"use_sim_time": False}
ARM = {"use_sim_time": False, "lockstep": False, "coupling": "none", "joint_state_decimation": 4}
LATCHED = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
#: an arm on the wall clock keeps its stamps with it, as a real arm's driver does (a busy machine
#: would otherwise leave them seconds behind: a skewed clock, which the executive refuses)
WALL_ARM = {"max_lag": 0.5}


@pytest.fixture(scope="module")
def plan_file(tmp_path_factory) -> Path:
    from robot_grinding_sim.core.config import CellConfig
    from robot_grinding_sim.core.job.plan_job import plan_job
    from robot_grinding_sim.core.planning import plan_io

    plan = plan_job(CellConfig(), optimise=False, max_passes=1, pass_length=0.01, check_collisions=False)
    return plan_io.write_plan(plan, tmp_path_factory.mktemp("plan") / "plan.json")


def start_cell(launch_node, probe, plan_file, wall=False, **executive):
    arm = launch_node("dynamics_node", params_file=[CELL, REPO / "config" / "dynamics_node.yaml"],
                      params={**ARM, "publish_clock": not wall, **(WALL_ARM if wall else {})})
    ex = launch_node("grinding_executive", params_file=[CELL, REPO / "config" / "grinding_executive.yaml"],
                     params={**(WALL if wall else SIM), "plan_file": str(plan_file), **executive})
    c = {
        # the arm's 250 Hz streams with 40 s of reader history: a depth of 10 lost every state that
        # came while this process was descheduled for 40 ms (under load 11 it never saw the plan's first knot)
        "js": probe.subscribe(JointState, "/joint_states", qos=10_000, keep=200_000),
        "cmd": probe.subscribe(JointTrajectory, TRAJ_TOPIC),
        "progress": probe.subscribe(Float64MultiArray, "/grinding/progress"),
        "state": probe.subscribe(String, "/grinding_executive/state", qos=LATCHED),
        "diag": probe.subscribe(DiagnosticArray, "/diagnostics"),
        "pose": probe.subscribe(PoseStamped, "/dynamics_node/tool_pose", qos=10_000, keep=200_000),
        "markers": probe.subscribe(MarkerArray, "/grinding/progress_markers", qos=LATCHED),
    }
    probe.wait_for_messages(c["js"], 1, procs=[arm])
    probe.wait_for(lambda: c["state"].last is not None and c["state"].last.data == "ready", what="executive ready",
                   procs=[ex])
    wait_arm_seen(probe, c["diag"], ex)
    return arm, ex, c


def wait_arm_seen(probe, diag, ex):
    """Until the executive's diagnostics say it has joint states and the arm's controller subscribes
    to its commands (the probe seeing the arm says nothing of the executive's own matching on a
    busy machine)."""
    def seen() -> bool:
        for m in diag.messages:
            for s in m.status:
                kv = {k.key: k.value for k in s.values}
                if kv.get("joint_states") == "received" and kv.get("controller_subscribers", "0") != "0":
                    return True
        return False

    probe.wait_for(seen, what="the executive's diagnostics: joint states received, a controller subscribed",
                   procs=[ex])


def surface_points(plan):
    """Each pass's surface points in the root frame, from plan.json (m)."""
    from scipy.spatial.transform import Rotation

    wp = plan["part"]["workpiece_pose"]
    R = Rotation.from_quat(wp["orientation"]).as_matrix()
    return [np.array([w["surface_point"] for w in p["waypoints"]]) @ R.T + np.array(wp["position"])
            for p in plan["passes"]]


def ground_lines(c):
    """The ``ground`` LINE_STRIPs of the last progress markers, (k, 3) each."""
    return [np.array([[p.x, p.y, p.z] for p in m.points]) for m in c["markers"].last.markers
            if m.ns == "ground" and m.type == Marker.LINE_STRIP]


def status_text(c) -> str:
    m = c["markers"].last
    return "" if m is None else next((k.text for k in m.markers if k.ns == "status"), "")


def state_is(c, *prefixes):
    return lambda: c["state"].last is not None and c["state"].last.data.startswith(prefixes)


def call(probe, name):
    return probe.call(Trigger, f"/grinding_executive/{name}", Trigger.Request())


def q_of(msg):
    pos = cv.joint_state_to_dict(msg, "position")
    return np.array([pos[j] for j in JOINT_ORDER])


JOINT_ORDER = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
               "wrist_3_joint"]


def test_the_executive_runs_the_plan_on_the_arm_with_pause_and_resume(launch_node, probe, plan_file) -> None:
    plan = json.loads(plan_file.read_text())
    traj = plan["trajectory"]
    q_first, q_last = np.array(traj["positions"][0]), np.array(traj["positions"][-1])
    arm, ex, c = start_cell(launch_node, probe, plan_file)
    # sim time held (the arm's hold_at breakpoint) while the job is sent, then let run to a point in the
    # pass and held there while this process pauses the job: on a busy machine it sees the job's
    # progress late (pass 0 was seen only after the job had ended: "cannot pause: the job is done")
    probe.set_param("/dynamics_node", "hold_at", 1e-3, procs=[arm])
    r = call(probe, "start")
    assert r.success, r.message
    # the command: a move to the plan's start, then the plan's knots
    probe.wait_for_messages(c["cmd"], 1, procs=[ex])
    cmd = c["cmd"].messages[0]
    assert list(cmd.joint_names) == traj["joint_names"]
    pts = np.array([p.positions for p in cmd.points])
    plan_q = np.array(traj["positions"])
    k = int(np.argmin(np.max(np.abs(pts - q_first), axis=1)))
    np.testing.assert_allclose(pts[k:], plan_q, atol=1e-9)
    dt_cmd = np.diff([cv.time_to_sec(p.time_from_start) for p in cmd.points][k:])
    np.testing.assert_allclose(dt_cmd, np.diff(traj["times"]), atol=1e-6)
    assert cv.time_to_sec(cmd.header.stamp) > cv.time_to_sec(c["js"].messages[0].header.stamp)  # ahead: no jump
    # into the pass (0.1 s of it), held there, then pause
    t_cmd = [cv.time_to_sec(p.time_from_start) for p in cmd.points]
    seg = next(g for g in traj["segments"] if g["kind"] == "pass")
    hold = cv.time_to_sec(cmd.header.stamp) + t_cmd[k] + traj["times"][seg["start"]] + 0.1
    probe.set_param("/dynamics_node", "hold_at", hold, procs=[arm])
    probe.wait_for(lambda: cv.time_to_sec(c["js"].last.header.stamp) > hold - 0.01, what="the arm held in the pass",
                   timeout=120, procs=[ex, arm])
    probe.wait_for(lambda: any(m.data[0] == 0 for m in c["progress"].messages), what="pass 0 in progress",
                   procs=[ex, arm])
    assert state_is(c, "running")()
    r = call(probe, "pause")
    assert r.success, r.message
    probe.set_param("/dynamics_node", "hold_at", 0.0, procs=[arm])
    probe.wait_for(state_is(c, "paused"), what="paused", procs=[ex, arm])
    n = len(c["js"].messages)
    probe.wait_for(lambda: len(c["js"].messages) > n + 50, what="joint states while paused", procs=[arm])
    still = np.array([q_of(m) for m in c["js"].messages[n:]])
    assert np.ptp(still, axis=0).max() < 1e-5  # at rest
    assert not call(probe, "start").success  # refused while paused
    assert call(probe, "resume").success
    probe.wait_for(state_is(c, "done"), what="job done", timeout=120, procs=[ex, arm])
    # the arm went through the plan's first and last knots (servo error only)
    qs = np.array([q_of(m) for m in c["js"].messages])
    assert np.min(np.max(np.abs(qs - q_first), axis=1)) < 2e-4
    probe.wait_for(lambda: np.max(np.abs(q_of(c["js"].last) - q_last)) < 1e-4, what="arm at the plan's end",
                   procs=[arm])
    # progress covered the pass: arc lengths to the pass's end, then -1
    prog = np.array([m.data[:3] for m in c["progress"].messages])
    on = prog[prog[:, 0] == 0]
    arc_end = max(a for a in traj["arc_length"] if a is not None)
    # the pass's end itself, however late the executive's timer ticked (it was missed under load)
    assert on[:, 1].max() == pytest.approx(arc_end, abs=1e-9)
    assert np.all(np.diff(on[:, 1]) >= -1e-12) and prog[-1, 0] == -1
    probe.wait_for(lambda: any(s.name == "grinding_executive: job" and s.message == "done"
                               for m in c["diag"].messages for s in m.status), what="diagnostics: done", procs=[ex])
    # the progress markers: the whole pass ground, the status says done
    probe.wait_for(lambda: status_text(c).startswith("done"), what="progress markers: done", procs=[ex])
    (line,) = ground_lines(c)
    np.testing.assert_allclose(line, surface_points(plan)[0], atol=1e-9)
    assert status_text(c) == "done: 1/1 passes ground"


def test_stop_retreats_along_the_normal(launch_node, probe, plan_file) -> None:
    plan = json.loads(plan_file.read_text())
    approach = plan["cell"]["process.approach"]
    arm, ex, c = start_cell(launch_node, probe, plan_file)
    assert call(probe, "start").success
    probe.wait_for(lambda: any(m.data[0] == 0 and m.data[1] > 0.003 for m in c["progress"].messages),
                   what="3 mm into pass 0", timeout=120, procs=[ex, arm])
    assert call(probe, "stop").success
    probe.wait_for(state_is(c, "stopped"), what="stopped", timeout=60, procs=[ex, arm])
    # where the braking ends (on the path) and where the command ends; the arm gets there
    stop_cmd = c["cmd"].messages[-1]
    times = [cv.time_to_sec(p.time_from_start) for p in stop_cmd.points]
    q_rest = np.array(stop_cmd.points[[i for i, t in enumerate(times) if t <= 0.3 + 1e-9][-1]].positions)
    q_cmd_end = np.array(stop_cmd.points[-1].positions)
    probe.wait_for(lambda: np.max(np.abs(q_of(c["js"].last) - q_cmd_end)) < 1e-4, what="arm at the retreat's end",
                   procs=[arm, ex])
    from robot_grinding_sim.core.robot.dynamics import RobotModel

    model = RobotModel.from_urdf(str(REPO / "urdf" / "ur10e_grinding.urdf"), tip_link="tcp")
    p_rest = model.fk(q_rest)[:3, 3]
    p_end = model.fk(q_of(c["js"].last))[:3, 3]
    wp = plan["part"]["workpiece_pose"]
    from scipy.spatial.transform import Rotation

    R = Rotation.from_quat(wp["orientation"]).as_matrix()
    ways = [w for p in plan["passes"] for w in p["waypoints"]]
    tcp = np.array([w["tcp"]["position"] for w in ways]) @ R.T + np.array(wp["position"])
    normal = np.array([w["normal"] for w in ways]) @ R.T
    n_ref = normal[int(np.argmin(np.linalg.norm(tcp - p_rest, axis=1)))]
    out = p_end - p_rest
    assert np.linalg.norm(out) == pytest.approx(approach, abs=1e-4)
    assert math.degrees(math.acos(min(1.0, out @ n_ref / np.linalg.norm(out)))) < 1.0
    assert c["progress"].last.data[0] == -1
    # the progress markers: pass 0 ground up to the arc reached (the TCP arc of /grinding/progress
    # mapped to the plan's surface points here), the status says stopped
    probe.wait_for(lambda: status_text(c).startswith("stopped"), what="progress markers: stopped", procs=[ex])
    reached = max(m.data[1] for m in c["progress"].messages if m.data[0] == 0)
    tcp = np.array([w["tcp"]["position"] for w in plan["passes"][0]["waypoints"]])
    arc = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(tcp, axis=0), axis=1))]
    surf = surface_points(plan)[0]
    end = np.array([np.interp(reached, arc, surf[:, j]) for j in range(3)])
    (line,) = ground_lines(c)
    assert 0.003 < reached < arc[-1]
    np.testing.assert_allclose(line[-1], end, atol=1e-9)
    np.testing.assert_allclose(line[:-1], surf[arc <= reached], atol=1e-9)


def test_a_push_off_the_path_fails_the_job(launch_node, probe, plan_file) -> None:
    """50 N on the tool of a soft servo (20 rad/s) pushes the arm centimetres off its path: the
    tracking error goes over the 1 mrad limit and the job stops with the reason."""
    from geometry_msgs.msg import WrenchStamped

    arm = launch_node("dynamics_node", params_file=[CELL, REPO / "config" / "dynamics_node.yaml"],
                      params={**ARM, "publish_clock": True, "coupling": "force", "servo.bandwidth": 20.0})
    ex = launch_node("grinding_executive", params_file=[CELL, REPO / "config" / "grinding_executive.yaml"],
                     params={**SIM, "plan_file": str(plan_file), "execution.tracking_error_limit": 1e-3})
    state = probe.subscribe(String, "/grinding_executive/state", qos=LATCHED)
    diag = probe.subscribe(DiagnosticArray, "/diagnostics")
    js = probe.subscribe(JointState, "/joint_states")
    probe.wait_for_messages(js, 1, procs=[arm])
    probe.wait_for(lambda: state.last is not None and state.last.data == "ready", what="ready", procs=[ex])
    wait_arm_seen(probe, diag, ex)
    assert call(probe, "start").success
    push = probe.publisher(WrenchStamped, "/contact/wrench")
    w = cv.array_to_wrench_stamped([0.0, 0.0, 50.0, 0.0, 0.0, 0.0], "tcp")

    def failed() -> bool:
        push.publish(w)
        return state.last is not None and state.last.data.startswith("failed")

    probe.wait_for(failed, what="failed", timeout=60, procs=[ex, arm])
    assert "tracking error" in state.last.data and "over the limit 0.001 rad" in state.last.data
    probe.wait_for(lambda: any(s.level == s.ERROR for m in diag.messages for s in m.status),
                   what="diagnostics: error", procs=[ex])


def test_silent_joint_states_fail_the_job(launch_node, probe, plan_file) -> None:
    # wall clock; a tracking limit the lag of a busy machine cannot reach: only the silence stops it
    arm, ex, c = start_cell(launch_node, probe, plan_file, wall=True, **{"execution.tracking_error_limit": 3.0})
    assert call(probe, "start").success
    probe.wait_for(state_is(c, "running"), what="running", procs=[ex])
    arm.stop()
    probe.wait_for(state_is(c, "failed"), what="failed", timeout=60, procs=[ex])
    assert "no joint states for" in c["state"].last.data
    assert ex.alive


def test_without_an_arm_start_is_refused_and_diagnostics_warn(launch_node, probe, plan_file) -> None:
    """The executive up with no joint states: ~/start fails naming them, the diagnostics warn; with
    joint states but no controller on the command topic it fails naming the topic; once an arm runs,
    the diagnostics say so and the start goes through."""
    ex = launch_node("grinding_executive", params_file=[CELL, REPO / "config" / "grinding_executive.yaml"],
                     params={**WALL, "plan_file": str(plan_file)})
    state = probe.subscribe(String, "/grinding_executive/state", qos=LATCHED)
    diag = probe.subscribe(DiagnosticArray, "/diagnostics")
    probe.wait_for(lambda: state.last is not None and state.last.data == "ready", what="ready", procs=[ex])
    r = call(probe, "start")
    assert not r.success and "no joint states yet" in r.message
    probe.wait_for(lambda: any(s.level == s.WARN and "no joint states yet" in s.message
                               for m in diag.messages for s in m.status), what="diagnostics: warning", procs=[ex])
    # joint states but no controller listening: nothing is sent into the void
    js = probe.publisher(JointState, "/joint_states")
    home = JointState(name=JOINT_ORDER, position=[0.0, -1.2, 1.9, -2.27, -1.57, 0.0])

    def received() -> bool:
        js.publish(home)
        return any(kv.key == "joint_states" and kv.value == "received"
                   for m in diag.messages for s in m.status for kv in s.values)

    probe.wait_for(received, what="the executive's diagnostics: joint_states received", procs=[ex])
    r = call(probe, "start")
    assert not r.success and f"nobody subscribes to {TRAJ_TOPIC}" in r.message
    arm = launch_node("dynamics_node", params_file=[CELL, REPO / "config" / "dynamics_node.yaml"],
                      params={**ARM, "use_sim_time": False, "publish_clock": False, **WALL_ARM})
    wait_arm_seen(probe, diag, ex)
    r = call(probe, "start")
    assert r.success, r.message
    assert arm.alive and ex.alive


def test_a_bad_plan_is_refused_and_the_executive_stays_up(launch_node, probe, tmp_path, plan_file) -> None:
    """A plan_file that is not a plan: the executive stays up, says why (log, ~/start, diagnostics);
    setting plan_file to a good plan at run time loads it; a bad one then is refused with the reason
    and the loaded plan stays."""
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters

    bad = tmp_path / "plan.json"
    bad.write_text('{"schema": "nope"}')
    ex = launch_node("grinding_executive", params_file=[CELL, REPO / "config" / "grinding_executive.yaml"],
                     params={**WALL, "plan_file": str(bad)})
    state = probe.subscribe(String, "/grinding_executive/state", qos=LATCHED)
    diag = probe.subscribe(DiagnosticArray, "/diagnostics")
    probe.wait_for(lambda: state.last is not None and state.last.data == "idle", what="idle", procs=[ex])
    r = call(probe, "start")
    assert not r.success and "no plan loaded: plan_file" in r.message and str(bad) in r.message
    probe.wait_for(lambda: any(s.level == s.ERROR and str(bad) in s.message for m in diag.messages
                               for s in m.status), what="diagnostics: the plan error", procs=[ex])

    def set_plan(path) -> object:
        req = SetParameters.Request(parameters=[Parameter(name="plan_file", value=ParameterValue(
            type=ParameterType.PARAMETER_STRING, string_value=str(path)))])
        return probe.call(SetParameters, "/grinding_executive/set_parameters", req, procs=[ex]).results[0]

    res = set_plan(plan_file)
    assert res.successful, res.reason
    probe.wait_for(lambda: state.last.data == "ready", what="ready with the good plan", procs=[ex])
    res = set_plan(bad)
    assert not res.successful and "plan_file" in res.reason and str(bad) in res.reason
    res = set_plan(tmp_path / "missing.json")
    assert not res.successful and "missing.json" in res.reason
    assert state.last.data == "ready" and ex.alive
    assert "Traceback" not in ex.log()


@pytest.mark.slow
def test_an_arm_that_stops_in_the_pass_fails_the_job_and_retreats(launch_node, probe, plan_file) -> None:
    """The arm's controller is told "stop here" 4 mm into the 10 mm pass (a one-point trajectory at
    the arm's position, published here to the controller's topic, as a driver or an operator would):
    the arm holds while the executive's reference runs on. The joint error this leaves to the plan's
    end stays under the 0.05 rad tracking limit, and the clock alone made this job "done" with the
    tool on the part; now it is not done: it fails once settle_time has passed without the arm at
    the plan's end, and the tool retreats from where it stopped."""
    arm, ex, c = start_cell(launch_node, probe, plan_file)
    assert call(probe, "start").success
    probe.wait_for(lambda: any(m.data[0] == 0 and m.data[1] > 0.004 for m in c["progress"].messages),
                   what="4 mm into pass 0", timeout=120, procs=[ex, arm])
    hold = probe.publisher(JointTrajectory, TRAJ_TOPIC)
    from trajectory_msgs.msg import JointTrajectoryPoint

    q = q_of(c["js"].last)
    stop_here = JointTrajectory(joint_names=JOINT_ORDER, points=[JointTrajectoryPoint(
        positions=q.tolist(), velocities=[0.0] * 6, time_from_start=cv.sec_to_duration(0.05))])
    n_cmd = len(c["cmd"].messages)
    hold.publish(stop_here)
    probe.wait_for(state_is(c, "failed", "done", "stopped"), what="the job's end", timeout=120, procs=[ex, arm])
    text = c["state"].last.data
    assert text.startswith("failed: the arm did not reach the plan's end") and "retreating from pass 0" in text, text
    # after the hold, the executive's retreat from where the arm stopped: the arm follows it
    assert len(c["cmd"].messages) > n_cmd + 1 and "sent retreat" in ex.log()
    q_cmd_end = np.array(c["cmd"].messages[-1].points[-1].positions)
    probe.wait_for(lambda: np.max(np.abs(q_of(c["js"].last) - q_cmd_end)) < 1e-4, what="arm at the retreat's end",
                   procs=[arm, ex])


@pytest.mark.slow
def test_joint_states_stamped_an_hour_behind_are_named_and_never_end_done(launch_node, probe, plan_file) -> None:
    """An arm whose joint states are stamped 1 h behind the executive's clock (this probe is the arm:
    it subscribes to the command topic and publishes the plan's first knot, never moving). Before,
    its states kept the silence watchdog happy, none was checked (all before the command's stamp), and
    the job ended "done" after its duration. Now ~/start is refused naming the offset and the
    diagnostics warn; started on good stamps, a job whose states turn skewed fails naming it."""
    plan = json.loads(plan_file.read_text())
    q0 = plan["trajectory"]["positions"][0]
    ex = launch_node("grinding_executive", params_file=[CELL, REPO / "config" / "grinding_executive.yaml"],
                     params={**WALL, "plan_file": str(plan_file)})
    state = probe.subscribe(String, "/grinding_executive/state", qos=LATCHED)
    diag = probe.subscribe(DiagnosticArray, "/diagnostics")
    probe.subscribe(JointTrajectory, TRAJ_TOPIC)  # the arm's controller
    js = probe.publisher(JointState, "/joint_states", procs=[ex])
    behind = [3600.0]

    def publish() -> None:
        t = probe.node.get_clock().now().nanoseconds * 1e-9 - behind[0]
        msg = JointState(name=JOINT_ORDER, position=q0)
        msg.header.stamp = cv.sec_to_time(t)
        js.publish(msg)

    def warned() -> bool:
        publish()
        return any(s.level == s.WARN and "3600 s behind this node's clock" in s.message
                   for m in diag.messages for s in m.status)

    def received() -> bool:
        publish()
        return any(kv.key == "joint_states" and kv.value == "received"
                   for m in diag.messages for s in m.status for kv in s.values)

    probe.wait_for(received, what="the executive's diagnostics: joint_states received", procs=[ex])
    r = call(probe, "start")
    assert not r.success and "cannot start" in r.message and "3600 s behind this node's clock" in r.message, r.message
    probe.wait_for(warned, what="diagnostics: the skew", procs=[ex])
    # good stamps: the start goes through; then the arm's clock steps back an hour
    behind[0] = 0.0

    def started() -> bool:
        publish()
        for m in diag.messages[-3:]:
            for s in m.status:
                if any(k.key == "joint_states_clock_offset_s" and abs(float(k.value)) < 1.0 for k in s.values):
                    return call(probe, "start").success
        return False

    probe.wait_for(started, what="a start on good stamps", procs=[ex])
    behind[0] = 3600.0

    def ended() -> bool:
        publish()
        return state.last is not None and state.last.data.startswith(("failed", "done", "stopped"))

    probe.wait_for(ended, what="the job's end", timeout=60, procs=[ex])
    text = state.last.data
    assert text.startswith("failed: no usable joint states for") and "3600 s behind this node's clock" in text, text
    assert ex.alive and "Traceback" not in ex.log()

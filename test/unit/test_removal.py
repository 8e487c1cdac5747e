"""Preston removal (core.contact.preston) against closed forms, a conservation law and mr-sim.

A ball of radius R pressed with a constant force F on a flat plate (z = 0) and moved straight along
x at the feed v_f:
- without spindle rotation the removed volume is exactly k_p F v_f T, and the steady cross-section
  across the pass is k_p p0 (pi / 2) (a^2 - y^2) / a (Hertz pressure integrated along the pass);
- with the spindle turning at w the abrasive slides at |v_f x + w z x r|; the removed volume is
  k_p F v_bar T with v_bar the pressure-weighted mean of that speed over the patch (a double
  integral, scipy's dblquad), 3 pi w a / 16 at rest; the cross-section is k_p / v_f times the
  integral along x of p(x, y) |v| (scipy's quad), and in closed form when the spindle's w r is the
  whole speed: k_p p0 w / v_f 2 s^2 J(s / a), s^2 = a^2 - y^2,
  J(k) = ((2 k^2 - 1) E(k) + (1 - k^2) K(k)) / (3 k^2) (complete elliptic integrals);
- mr-sim (Preston on a grid, a round tool with uniform pressure, rotary speed w r) on one pass
  gives the same map as the grid with ``pressure="uniform"``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.integrate import dblquad, quad
from scipy.special import ellipe, ellipk

from robot_grinding_sim.core.contact.preston import RemovalGrid, patch_radius

R, D, F, KP = 0.02, 5e-5, 5.0, 1e-12
A = patch_radius(R, D)  # 1.41 mm
P0 = 3.0 * F / (2.0 * math.pi * A * A)
H = 5e-5  # grid spacing, m


def plate(x0: float, x1: float, y0: float, y1: float, h: float = H, **kw) -> RemovalGrid:
    xs, ys = np.arange(x0, x1 + h / 2, h), np.arange(y0, y1 + h / 2, h)
    Y, X = np.meshgrid(ys, xs, indexing="ij")
    pts = np.column_stack([X.ravel(), Y.ravel(), np.zeros(X.size)])
    return RemovalGrid(pts, np.full(X.size, h * h), np.tile([0.0, 0.0, 1.0], (X.size, 1)), (len(ys), len(xs)),
                       preston_coefficient=KP, **kw)


def straight_pass(grid: RemovalGrid, length: float, feed: float, omega: float, dt: float = 1e-3,
                  feed_slides: bool = True) -> float:
    """The ball from x = 0 to ``length`` along y = 0 at ``feed``, the spindle along z at ``omega``;
    ``feed_slides=False`` leaves the feed out of the sliding speed. Returns the time taken."""
    n = int(round(length / (feed * dt)))
    v_feed = np.array([feed if feed_slides else 0.0, 0.0, 0.0])
    for k in range(n):
        x = (k + 0.5) * feed * dt
        grid.accumulate(np.array([x, 0.0, 0.0]), np.array([0.0, 0.0, 1.0]), F, A, np.array([x, 0.0, R - D]),
                        np.array([0.0, 0.0, omega]), v_feed, dt)
    return n * dt


def mean_sliding_speed(feed: float, omega: float) -> float:
    """The Hertz-pressure-weighted mean over the patch of |v_f x + w z x r| (m/s), by quadrature."""
    def integrand(r: float, phi: float) -> float:
        x, y = r * math.cos(phi), r * math.sin(phi)
        return P0 * math.sqrt(max(1.0 - r * r / (A * A), 0.0)) * math.hypot(feed - omega * y, omega * x) * r

    return dblquad(integrand, 0.0, 2.0 * math.pi, 0.0, A, epsabs=0.0, epsrel=1e-10)[0] / F


def section(grid: RemovalGrid, x: float) -> tuple[np.ndarray, np.ndarray]:
    rows, cols = grid.shape
    P = grid.points.reshape(rows, cols, 3)
    j = int(np.argmin(np.abs(P[0, :, 0] - x)))
    return P[:, j, 1], grid.depth.reshape(rows, cols)[:, j]


def test_volume_is_kp_times_the_integral_of_force_times_speed() -> None:
    grid = plate(-0.003, 0.013, -0.003, 0.003)
    T = straight_pass(grid, 0.01, 0.01, 0.0)
    assert grid.volume() == pytest.approx(KP * F * 0.01 * T, rel=1e-9)
    # the spindle turning: the speed varies over the patch; V = k_p F v_bar T, v_bar by quadrature
    assert mean_sliding_speed(0.0, 1047.0) == pytest.approx(3.0 * math.pi * 1047.0 * A / 16.0, rel=1e-8)
    for omega in (200.0, 1047.0):
        spun = plate(-0.003, 0.013, -0.003, 0.003)
        T = straight_pass(spun, 0.01, 0.01, omega)
        expected = KP * F * mean_sliding_speed(0.01, omega) * T
        print(f"w {omega:g} rad/s: volume error {spun.volume() / expected - 1:+.3%}")
        assert spun.volume() == pytest.approx(expected, rel=0.01)


def test_steady_cross_section_matches_the_closed_form_without_rotation() -> None:
    grid = plate(-0.003, 0.013, -0.003, 0.003)
    straight_pass(grid, 0.01, 0.01, 0.0)
    y, h = section(grid, 0.005)
    inside = np.abs(y) < A
    expected = KP * P0 * (math.pi / 2.0) * np.clip(A * A - y * y, 0.0, None) / A
    err = np.max(np.abs(h - expected)) / expected.max()
    print(f"cross-section error {err:.3%}")
    assert err < 0.02, err
    assert np.all(h[~inside] < 0.02 * expected.max())


@pytest.mark.parametrize("omega", [200.0, 1047.0])
def test_cross_section_with_the_spindle_turning_matches_quadrature(omega: float) -> None:
    feed = 0.01
    grid = plate(-0.003, 0.013, -0.003, 0.003)
    straight_pass(grid, 0.01, feed, omega)
    y, h = section(grid, 0.005)

    def ref(yy: float) -> float:
        w = math.sqrt(max(A * A - yy * yy, 0.0))
        if w == 0.0:
            return 0.0

        def integrand(x: float) -> float:
            p = P0 * math.sqrt(max(1.0 - (x * x + yy * yy) / (A * A), 0.0))
            vx, vy = feed - omega * yy, omega * x  # v_f x + w z x (x, y)
            return p * math.hypot(vx, vy)

        return KP / feed * quad(integrand, -w, w, limit=200)[0]

    expected = np.array([ref(float(v)) for v in y])
    err = np.max(np.abs(h - expected)) / expected.max()
    print(f"cross-section error {err:.3%}")
    assert err < 0.02, err


def test_cross_section_with_the_spindle_speed_alone_matches_the_elliptic_closed_form() -> None:
    omega, feed = 1047.0, 0.01
    grid = plate(-0.003, 0.013, -0.003, 0.003)
    straight_pass(grid, 0.01, feed, omega, feed_slides=False)
    y, h = section(grid, 0.005)
    s2 = np.clip(A * A - y * y, 0.0, None)
    m = np.clip(s2 / (A * A), 1e-12, 1.0 - 1e-15)  # k^2 ((1 - k^2) K(k) -> 0 as k -> 1)
    J = ((2.0 * m - 1.0) * ellipe(m) + (1.0 - m) * ellipk(m)) / (3.0 * m)
    expected = np.where(s2 > 0, KP * P0 * omega / feed * 2.0 * s2 * J, 0.0)
    # at the centre line: k_p p0 w 2 a^2 / (3 v_f); the most removed off it (the double hump)
    assert expected[np.argmin(np.abs(y))] == pytest.approx(KP * P0 * omega * 2.0 * A * A / (3.0 * feed), rel=1e-6)
    err = np.max(np.abs(h - expected)) / expected.max()
    print(f"cross-section error (spindle alone, elliptic closed form) {err:.3%}")
    assert err < 0.02, err


def test_removal_rate_at_rest_is_the_pressure_weighted_mean_speed() -> None:
    omega, T = 1047.0, 0.05
    grid = plate(-0.002, 0.002, -0.002, 0.002, h=2.5e-5)
    for _ in range(50):
        grid.accumulate(np.zeros(3), np.array([0.0, 0.0, 1.0]), F, A, np.array([0.0, 0.0, R - D]),
                        np.array([0.0, 0.0, omega]), np.zeros(3), T / 50)
    assert grid.volume() == pytest.approx(KP * F * 3.0 * math.pi * omega * A / 16.0 * T, rel=0.01)


def test_one_pass_matches_mr_sim() -> None:
    import mr_sim

    omega, feed, dt, h = 600.0, 0.01, 1e-3, 1e-4
    sim = mr_sim.create_simulation(mr_sim.Flat, mr_sim.Round, mr_sim.Rotary, mr_sim.Preston)(
        0.02, 0.008, dx=h, dy=h, dt=dt, radius=A, kp=KP)
    sim.set_force(F)
    sim.set_speed(omega)
    xs, ys = sim.X[0], sim.Y[:, 0]
    pts = np.column_stack([sim.X.ravel(), sim.Y.ravel(), np.zeros(sim.X.size)])
    grid = RemovalGrid(pts, np.full(sim.X.size, h * h), None, sim.X.shape, preston_coefficient=KP,
                       pressure="uniform")
    n = int(round(0.01 / (feed * dt)))
    for k in range(n):
        x = -0.005 + (k + 0.5) * feed * dt
        sim.set_location(x, 0.0)
        sim.step()
        # mr-sim's rotary tool slides at w r only (no feed term): the same here
        grid.accumulate(np.array([x, 0.0, 0.0]), np.array([0.0, 0.0, 1.0]), F, A, np.array([x, 0.0, R - D]),
                        np.array([0.0, 0.0, omega]), np.zeros(3), dt)
    ours = grid.depth.reshape(sim.X.shape)
    theirs = sim.profile
    assert xs.size and ys.size
    rel_l2 = np.linalg.norm(ours - theirs) / np.linalg.norm(theirs)
    print(f"mr-sim: relative L2 {rel_l2:.3%}, volume {grid.volume() / (float(theirs.sum()) * h * h) - 1:+.3%}")
    assert rel_l2 < 0.02, rel_l2
    assert grid.volume() == pytest.approx(float(theirs.sum()) * h * h, rel=0.02)


def test_bad_grids_are_refused_by_name() -> None:
    from robot_grinding_sim.core.errors import InputError

    with pytest.raises(InputError, match="positive areas"):
        RemovalGrid(np.zeros((2, 3)), np.array([1.0, 0.0]))
    with pytest.raises(InputError, match="removal.pressure"):
        RemovalGrid(np.zeros((1, 3)), np.ones(1), pressure="parabolic")


@pytest.mark.parametrize("rows, cols, cell", [(97, 131, 1e-3), (60, 45, 2e-4), (100, 100, 7e-4)])
def test_display_mesh_is_the_block_maxima_around_the_removal(rows: int, cols: int, cell: float) -> None:
    """The removal map's display: every k x k block's largest depth (nodes off the face count 0),
    the blocks around any removal with one block of margin, two triangles per block corner on the
    face; against the blocks pooled one by one over the whole grid."""
    spacing = 2e-4
    g = np.stack(np.meshgrid(np.arange(rows) * spacing, np.arange(cols) * spacing, indexing="ij"), -1).reshape(-1, 2)
    rng = np.random.default_rng(rows)
    grid = RemovalGrid(np.column_stack([g, np.zeros(len(g))]), np.full(len(g), spacing**2), shape=(rows, cols))
    grid.inside = rng.random(len(g)) > 0.1
    assert grid.display_mesh(cell)[0].shape == (0, 3)
    k = max(1, round(cell / spacing))
    for patch in [(slice(0, 3), slice(cols - 2, cols)), (slice(rows // 2, rows // 2 + 7), slice(5, cols - 9)),
                  (slice(rows - 1, rows), slice(0, 1))]:
        grid.depth[:] = 0.0  # each patch alone: at the grid's corners and edges, and inside
        grid.depth.reshape(rows, cols)[patch] = rng.random(grid.depth.reshape(rows, cols)[patch].shape) * 1e-6
        D = np.where(grid.inside, grid.depth, 0.0).reshape(rows, cols)
        nr, nc = -(-rows // k), -(-cols // k)
        blocks = np.array([[D[i * k:(i + 1) * k, j * k:(j + 1) * k].max() for j in range(nc)] for i in range(nr)])
        hit = np.argwhere(blocks > 0)
        (r0, c0), (r1, c1) = np.maximum(hit.min(0) - 1, 0), np.minimum(hit.max(0) + 2, (nr, nc))
        V, T, depth = grid.display_mesh(cell)
        m, n = r1 - r0, c1 - c0
        corners = grid.points.reshape(rows, cols, 3)[r0 * k:r1 * k:k, c0 * k:c1 * k:k]
        np.testing.assert_array_equal(V, corners.reshape(-1, 3))
        np.testing.assert_array_equal(depth, blocks[r0:r1, c0:c1].ravel())
        on_face = grid.inside.reshape(rows, cols)[r0 * k:r1 * k:k, c0 * k:c1 * k:k][:-1, :-1]
        assert len(T) == 2 * on_face.sum() and T.max(initial=-1) < m * n
        ids = np.arange(m * n).reshape(m, n)
        quads = {(int(a), int(b), int(d)) for a, b, d in zip(ids[:-1, :-1][on_face], ids[:-1, 1:][on_face],
                                                             ids[1:, 1:][on_face], strict=True)}
        assert quads <= {tuple(t) for t in T.tolist()}


def test_display_mesh_of_a_large_removal_stays_within_its_size() -> None:
    """A face ground all over: the display grows its blocks by whole grid steps until it holds at
    most max_blocks vertices, and is then exactly the display at that coarser cell."""
    rows, cols, spacing = 400, 300, 2e-4
    g = np.stack(np.meshgrid(np.arange(rows) * spacing, np.arange(cols) * spacing, indexing="ij"), -1).reshape(-1, 2)
    grid = RemovalGrid(np.column_stack([g, np.zeros(len(g))]), np.full(len(g), spacing**2), shape=(rows, cols))
    grid.depth[:] = np.random.default_rng(1).random(len(g)) * 1e-6
    fine = grid.display_mesh(1e-3)
    assert len(fine[0]) == 80 * 60
    for max_blocks in (1000, 2500):
        V, T, depth = grid.display_mesh(1e-3, max_blocks)
        assert max_blocks / 4 < len(V) <= max_blocks
        same = [k for k in range(5, 40) if len(grid.display_mesh(k * spacing)[0]) == len(V)]
        assert len(same) == 1
        for a, b in zip((V, T, depth), grid.display_mesh(same[0] * spacing), strict=True):
            np.testing.assert_array_equal(a, b)
    assert all(np.array_equal(a, b) for a, b in zip(grid.display_mesh(1e-3, 10**6), fine, strict=True))

"""Numba kernels on a triangle mesh: geodesic distance by fast marching, and level-set curves.

:func:`fast_marching`: the first-order fast marching method on triangles (Kimmel and Sethian,
1998), in the vector form: the distance at a vertex C from two known corners A, B of a triangle
is the largest root of ``(d - dA, d - dB) Q (d - dA, d - dB)^T = 1`` with ``Q`` the inverse Gram
matrix of ``A - C, B - C`` (a plane wave of unit gradient through the three corners), accepted
when the wave comes from inside the triangle; otherwise the edge updates ``dA + |AC|``,
``dB + |BC|``. ``links`` are extra vertex pairs updated along their straight segment (the joints
between adjacent faces' grids). Error: first order in the edge length on acute triangles.

:func:`level_segments` and :func:`chain_segments`: marching triangles for the curves
``d = level`` (one segment per triangle per level crossing it), then the segments joined into
polylines through the edge crossings they share.

Units: whatever the points are in (metres in the planner); distances in the same unit.
"""

from __future__ import annotations

import heapq
import math

import numba
import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


def vertex_triangles(triangles: IntArray, n: int) -> tuple[IntArray, IntArray]:
    """CSR adjacency vertex -> triangles: (ptr (n + 1,), idx (3 m,))."""
    flat = triangles.ravel()
    order = np.argsort(flat, kind="stable")
    counts = np.bincount(flat, minlength=n)
    ptr = np.r_[0, np.cumsum(counts)].astype(np.int64)
    return ptr, (order // 3).astype(np.int64)


def csr_links(links: IntArray, n: int) -> tuple[IntArray, IntArray]:
    """CSR adjacency of the symmetric vertex pairs ``links`` (k, 2)."""
    if len(links) == 0:
        return np.zeros(n + 1, dtype=np.int64), np.zeros(0, dtype=np.int64)
    a = np.r_[links[:, 0], links[:, 1]]
    b = np.r_[links[:, 1], links[:, 0]]
    order = np.argsort(a, kind="stable")
    counts = np.bincount(a, minlength=n)
    return np.r_[0, np.cumsum(counts)].astype(np.int64), b[order].astype(np.int64)


@numba.njit(cache=True)
def _tri_update(P: FloatArray, c: int, a: int, b: int, da: float, db: float) -> float:
    e1x, e1y, e1z = P[a, 0] - P[c, 0], P[a, 1] - P[c, 1], P[a, 2] - P[c, 2]
    e2x, e2y, e2z = P[b, 0] - P[c, 0], P[b, 1] - P[c, 1], P[b, 2] - P[c, 2]
    g11 = e1x * e1x + e1y * e1y + e1z * e1z
    g12 = e1x * e2x + e1y * e2y + e1z * e2z
    g22 = e2x * e2x + e2y * e2y + e2z * e2z
    det = g11 * g22 - g12 * g12
    edge = min(da + math.sqrt(g11), db + math.sqrt(g22))
    if det <= 1e-12 * g11 * g22:
        return edge
    q11, q12, q22 = g22 / det, -g12 / det, g11 / det
    # (d - da, d - db) Q (...)^T = 1  ->  A d^2 - 2 B d + C = 0
    A = q11 + 2.0 * q12 + q22
    B = q11 * da + q12 * (da + db) + q22 * db
    C = q11 * da * da + 2.0 * q12 * da * db + q22 * db * db - 1.0
    disc = B * B - A * C
    if disc < 0.0 or A <= 0.0:
        return edge
    d = (B + math.sqrt(disc)) / A
    if d < max(da, db):
        return edge
    # the gradient g = alpha e1 + beta e2 with (alpha, beta) = Q (da - d, db - d); upwind: -g inside the cone
    alpha = q11 * (da - d) + q12 * (db - d)
    beta = q12 * (da - d) + q22 * (db - d)
    if alpha > 1e-12 or beta > 1e-12:
        return edge
    return min(d, edge)


@numba.njit(cache=True)
def fast_marching(P: FloatArray, T: IntArray, vt_ptr: IntArray, vt_idx: IntArray, lk_ptr: IntArray,
                  lk_idx: IntArray, d0: FloatArray) -> FloatArray:
    """Distances (n,) from the vertices with a finite ``d0`` (their starting values), m."""
    n = P.shape[0]
    d = d0.copy()
    known = np.zeros(n, dtype=np.bool_)
    heap = [(0.0, np.int64(0))]
    heap.pop()
    for i in range(n):
        if np.isfinite(d[i]):
            heap.append((d[i], np.int64(i)))
    heapq.heapify(heap)
    while len(heap):
        di, i = heapq.heappop(heap)
        if known[i] or di > d[i]:
            continue
        known[i] = True
        for k in range(vt_ptr[i], vt_ptr[i + 1]):
            t = vt_idx[k]
            for j in range(3):
                c = T[t, j]
                if known[c]:
                    continue
                # the third corner
                b = -1
                for jj in range(3):
                    v = T[t, jj]
                    if v != c and v != i:
                        b = v
                if known[b]:
                    new = _tri_update(P, c, i, b, d[i], d[b])
                else:
                    dx, dy, dz = P[c, 0] - P[i, 0], P[c, 1] - P[i, 1], P[c, 2] - P[i, 2]
                    new = d[i] + math.sqrt(dx * dx + dy * dy + dz * dz)
                if new < d[c]:
                    d[c] = new
                    heapq.heappush(heap, (new, c))
        for k in range(lk_ptr[i], lk_ptr[i + 1]):
            c = lk_idx[k]
            if known[c]:
                continue
            dx, dy, dz = P[c, 0] - P[i, 0], P[c, 1] - P[i, 1], P[c, 2] - P[i, 2]
            new = d[i] + math.sqrt(dx * dx + dy * dy + dz * dz)
            if new < d[c]:
                d[c] = new
                heapq.heappush(heap, (new, c))
    return d


@numba.njit(cache=True)
def level_segments(d: FloatArray, T: IntArray, levels: FloatArray
                   ) -> tuple[IntArray, IntArray, IntArray, FloatArray, IntArray]:
    """Marching triangles for every level.

    Returns per segment: the level index (s,), the triangle (s,), and for its two ends the edge
    crossed as vertex pairs (s, 2, 2) with the interpolation weight of the second vertex (s, 2);
    and the crossing keys (s, 2) (``level * n^2 + min * n + max`` of the edge's vertices).
    """
    n = d.shape[0]
    m = T.shape[0]
    cap = 1024
    lev = np.empty(cap, dtype=np.int64)
    tri = np.empty(cap, dtype=np.int64)
    ends = np.empty((cap, 2, 2), dtype=np.int64)
    w = np.empty((cap, 2), dtype=np.float64)
    keys = np.empty((cap, 2), dtype=np.int64)
    s = 0
    L = levels.shape[0]
    for t in range(m):
        a, b, c = T[t, 0], T[t, 1], T[t, 2]
        lo = min(d[a], min(d[b], d[c]))
        hi = max(d[a], max(d[b], d[c]))
        if not (np.isfinite(lo) and np.isfinite(hi)):
            continue
        k0 = np.searchsorted(levels, lo, side="left")
        k1 = np.searchsorted(levels, hi, side="left")
        for k in range(k0, min(k1, L)):
            lv = levels[k]
            found = 0
            for e in range(3):
                p = T[t, e]
                q = T[t, (e + 1) % 3]
                sp, sq = d[p] > lv, d[q] > lv
                if sp != sq:
                    if found < 2:
                        if s >= cap:
                            cap *= 2
                            lev2 = np.empty(cap, dtype=np.int64)
                            lev2[:s] = lev[:s]
                            lev = lev2
                            tri2 = np.empty(cap, dtype=np.int64)
                            tri2[:s] = tri[:s]
                            tri = tri2
                            ends2 = np.empty((cap, 2, 2), dtype=np.int64)
                            ends2[:s] = ends[:s]
                            ends = ends2
                            w2 = np.empty((cap, 2), dtype=np.float64)
                            w2[:s] = w[:s]
                            w = w2
                            keys2 = np.empty((cap, 2), dtype=np.int64)
                            keys2[:s] = keys[:s]
                            keys = keys2
                        lo_v, hi_v = min(p, q), max(p, q)
                        ends[s, found, 0] = lo_v
                        ends[s, found, 1] = hi_v
                        w[s, found] = (lv - d[lo_v]) / (d[hi_v] - d[lo_v])
                        keys[s, found] = (k * n + lo_v) * n + hi_v
                    found += 1
            if found == 2:
                lev[s] = k
                tri[s] = t
                s += 1
    return lev[:s], tri[:s], ends[:s], w[:s], keys[:s]


@numba.njit(cache=True)
def chain_segments(node: IntArray, n_nodes: int) -> tuple[IntArray, IntArray, NDArray[np.bool_]]:
    """Join segments (s, 2) of node ids into polylines through shared nodes.

    Returns the segment order (s,) as a walk (each segment once, oriented: ``flip`` (s,) tells a
    segment is walked from its second node) and the start of each chain in it (c + 1,).
    """
    s = node.shape[0]
    # node -> up to two segments
    first = np.full(n_nodes, -1, dtype=np.int64)
    second = np.full(n_nodes, -1, dtype=np.int64)
    for i in range(s):
        for j in range(2):
            v = node[i, j]
            if first[v] < 0:
                first[v] = i
            elif second[v] < 0:
                second[v] = i
    used = np.zeros(s, dtype=np.bool_)
    order = np.empty(s, dtype=np.int64)
    flip = np.zeros(s, dtype=np.bool_)
    starts = [0]
    pos = 0
    for phase in range(2):  # open chains first (start at a node of one segment), then loops
        for i in range(s):
            if used[i]:
                continue
            a, b = node[i, 0], node[i, 1]
            if phase == 0:
                if second[a] >= 0 and second[b] >= 0:
                    continue
                fl = second[a] >= 0  # walk away from the free end
            else:
                fl = False
            cur, fcur = i, fl
            while cur >= 0 and not used[cur]:
                used[cur] = True
                order[pos] = cur
                flip[pos] = fcur
                pos += 1
                end = node[cur, 0] if fcur else node[cur, 1]
                nxt = first[end] if first[end] != cur else second[end]
                if nxt < 0 or used[nxt]:
                    break
                cur = nxt
                fcur = node[nxt, 1] == end
            starts.append(pos)
    out = np.empty(len(starts), dtype=np.int64)
    for k in range(len(starts)):
        out[k] = starts[k]
    return order, out, flip

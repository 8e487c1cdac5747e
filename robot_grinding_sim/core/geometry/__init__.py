"""Shapes and where they touch: the OpenCascade adapter (STEP/IGES/BREP, faces, exact points and
normals), B-spline kernels, exact closest points on CAD faces and meshes, the collision scene
(contacts, distances, time of impact) and the built-in parts.

Positions in metres; a part's own frame is ``workpiece``.
"""

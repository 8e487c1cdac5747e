"""The Winkler (foundation) law: a pressure over the tool's contact patch, p = k_w d(x).

A compliant tool (a sanding or polishing pad, a rubber-bonded or flap wheel) presses with a
pressure proportional to the local penetration d(x) (m) at each point x of its patch: k_w
(``contact.stiffness`` read as N/m^3: pressure per metre of penetration) times d(x). The force is
its integral over the patch,

    F = k_w * integral d(x) dA  (+ D d'),

so it follows the area in contact: a flat pad of area A pressed d into a plane gives F = k_w A d;
a cylinder of radius R and width L side-on gives F = k_w L (R^2 acos((R - d)/R) - (R - d)
sqrt(2 R d - d^2)) (the circular segment under the plane). The integral is a property of the tool
and the surface together: the tool shape (:mod:`~robot_grinding_sim.core.geometry.tools`) computes
it over its real patch at every step (the penetration of each element of its working surface
against the exact surface) and hands the law its two numbers:

- the patch stiffness K = k_w A_c (N/m; A_c the area in contact): dF/dd of a Winkler layer when
  the tool moves by dd along the normal (every point of the patch goes dd deeper);
- the equivalent penetration d_eq = integral d dA / A_c (m), so F = K d_eq.

Along the normal the contact is then a Kelvin-Voigt contact with that K, linearised at each step
(the coupled step advances it in closed form over the step and the tool shape recomputes K and
d_eq at the next): exact for a flat patch of constant area, first order in the area change
otherwise. Its kernel is Kelvin-Voigt's, its damping D = 2 zeta sqrt(K m) from ``contact.cr``
for the patch stiffness of the step (or ``contact.damping`` when fixed).

The Python model (:class:`Winkler`) is the law for a patch of a given ``area`` (m^2; default 1,
so that ``stiffness`` is then the patch stiffness: the contact model on ``contact/model`` carries
K = k_w A_c). Only tools with a patch (wheel, pad, disc) take it; the ball takes a point law.
"""

from __future__ import annotations

from robot_grinding_sim.core.contact.kelvin_voigt import KelvinVoigt, kv_kernel
from robot_grinding_sim.core.contact.law import LINEAR, ContactLaw
from robot_grinding_sim.core.contact.laws import check_positive


class Winkler(KelvinVoigt):
    """Winkler layer ``F = k_w A d + D d'`` over a flat patch of ``area`` A (m^2).

    Args:
        stiffness: k_w, pressure per metre of penetration, N/m^3.
        area: the patch area A, m^2 (1: ``stiffness`` is the patch stiffness, N/m).
        cr, damping, clamped: as :class:`~robot_grinding_sim.core.contact.kelvin_voigt.KelvinVoigt`
            for the patch stiffness k_w A.
    """

    name = "winkler"

    def __init__(self, stiffness: float, area: float = 1.0, cr: float | None = 1.0, damping: float | None = None,
                 clamped: bool = True) -> None:
        self.pressure_stiffness = check_positive("stiffness (pressure per penetration)", stiffness)
        self.area = check_positive("patch area", area)
        super().__init__(self.pressure_stiffness * self.area, cr=cr, damping=damping, clamped=clamped)

    def kernel_parameters(self, mass: float):  # type: ignore[no-untyped-def]
        lp = super().kernel_parameters(mass)
        from robot_grinding_sim.core.contact.law import LP
        from robot_grinding_sim.core.contact.registry import law_id

        lp[LP.index.law] = law_id(LAW.name)
        return lp


def _make(stiffness: float, cr: float | None = 1.0, damping: float | None = None, clamped: bool = True,
          area: float = 1.0, **_: object) -> Winkler:
    return Winkler(stiffness, area=area, cr=cr, damping=damping, clamped=clamped)


LAW = ContactLaw("winkler", LINEAR, ("stiffness", "cr", "damping"), kv_kernel, _make,
                 "pressure k_w d(x) over the tool's patch: F = k_w * integral d dA + D d' (wheel, pad, disc)",
                 static_exponent=lambda cfg: 1.0)
Winkler.law = LAW

"""Solving a serving benchmark's two figures at once: the quantities with some inputs held (:func:`evaluate`), one
input back-solved with the others held (:func:`solve`), and Newton's method on a pair (:func:`settle`)."""

from __future__ import annotations

from botec.errors import ContractError
from botec.explore.solve import solve_for

SOLVE_ROUNDS = 3            # TPOT then TTFT, alternately: enough at light load; nearer saturation, where prefill
SETTLED = 1e-4              # chunks ride in most steps and each efficiency moves the other's figure, Newton's
NEWTON_STEPS = 50           # method on the pair finishes (:func:`settle`) until both are within SETTLED


def evaluate(inputs, pinned: dict[str, float], wanted) -> dict[str, float]:
    """The wanted quantities with ``pinned`` graph quantities held at the given values (what the back-solver
    does meanwhile: :func:`botec.explore.solve.solve_for`'s overrides)."""
    from botec.graph import Given

    given = dict(inputs.given) | {name: Given(float(value), "measured") for name, value in pinned.items()}
    resolved = inputs.graph.evaluate(given, wanted=list(wanted), choices=inputs.choices)
    return {name: float(resolved[name].value) for name in wanted if name in resolved}


def solve(inputs, quantity: str, target: float, path: str, held: dict[str, float]) -> float | None:
    """The value of contract field ``path`` at which ``quantity`` equals ``target``, the ``held`` quantities
    pinned meanwhile; None when no value in the back-solver's bracket gives it (an efficiency: (0, 1])."""
    name = inputs.stated_fields[path][0]
    overrides = {key: value for key, value in held.items() if key != name}
    try:
        value, reached = solve_for(inputs, quantity, target, path, overrides)
    except ContractError:
        return None
    if abs(reached - target) > 1e-3 * abs(target):   # a jump in the quantity, not a root
        return None
    return value


def misses(inputs, held: dict[str, float], targets) -> float:
    """The largest relative miss, |estimated / measured − 1|, of the solved figures with ``held`` pinned."""
    if not targets:
        return 0.0
    values = evaluate(inputs, held, [quantity for quantity, *_ in targets])
    return max(abs(values[quantity] / measured - 1) for quantity, measured, *_ in targets)


def settle(inputs, held: dict[str, float], targets) -> dict[str, float]:
    """Newton's method on two solved inputs at once, from their alternating solution: x ← x − J⁻¹·r, with
    r_i = estimated_i / measured_i − 1 and the Jacobian J by forward differences (a step of 10⁻⁴ of each
    input); a step is halved until it stays in (0, bound] and misses by less. Returns the inputs that meet both figures within
    :data:`SETTLED`, or the starting ones when the method does not get there."""
    names = [name for _, _, name, _ in targets]
    bounds = [bound for *_, bound in targets]

    def residuals(x: list[float]) -> list[float]:
        values = evaluate(inputs, held | dict(zip(names, x)), [quantity for quantity, *_ in targets])
        return [values[quantity] / measured - 1 for quantity, measured, *_ in targets]

    x = [held[name] for name in names]
    for _ in range(NEWTON_STEPS):
        r = residuals(x)
        if max(abs(v) for v in r) <= SETTLED:
            return dict(zip(names, x))
        columns = []
        for j in range(2):
            h = 1e-4 * x[j]
            shifted = list(x)
            shifted[j] += h
            columns.append([(a - b) / h for a, b in zip(residuals(shifted), r)])
        (j00, j10), (j01, j11) = columns
        determinant = j00 * j11 - j01 * j10
        if determinant == 0:
            break
        step = [(r[0] * j11 - r[1] * j01) / determinant, (j00 * r[1] - j10 * r[0]) / determinant]
        worst = max(abs(v) for v in r)
        for _ in range(30):   # halve the step until it stays in bounds and misses by less
            trial = [value - delta for value, delta in zip(x, step)]
            if all(0 < value <= bound for value, bound in zip(trial, bounds)) and \
                    max(abs(v) for v in residuals(trial)) < worst:
                break
            step = [delta / 2 for delta in step]
        else:
            break
        x = trial
    final = dict(zip(names, x))
    return final if max(abs(v) for v in residuals(x)) <= SETTLED else {name: held[name] for name in names}



"""Bayesian optimisation over the space's own candidate list ("bo"): the strategy Kernel Tuner
found to beat the others on GPU tuning spaces (Willemsen et al., PMBS@SC21), in plain NumPy.

* Encoding: each parameter's value index, scaled to [0, 1] (the Param order is the geometry).
  Parameters with a single value are dropped.
* Candidates: the valid points themselves (`space.points()`, enumerated once), so nothing
  invalid is ever proposed and no proposal is wasted; spaces too big to enumerate use, each
  step, a fresh uniform sample plus the neighbours of the best points.
* Model: a Gaussian process with a Matern-5/2 ARD kernel on log(value), standardised; length
  scales, signal and noise variances by maximum marginal likelihood (L-BFGS-B on the analytic
  gradient, refitted each time the data grew by half). A failed evaluation is imputed as the
  worst value seen (a region to avoid).
* Acquisition: expected improvement over the unevaluated candidates, ties broken at random.
* Start: the initial points, then uniform random points up to `n_init` (2 per free
  parameter, at least 8 and at most 20, but no more than an eighth of a small space's valid
  points, and at least 3), then one model-chosen point per evaluation.

"bo+local" (the default) keeps the search near the elite, as trust-region BO does (TuRBO,
Eriksson et al., NeurIPS 2019), in the neighbourhood tuning spaces have:

* The trust region is the union of the unevaluated Hamming neighbours (one parameter changed,
  see `local.py`) of the `TRUST_ELITE` best evaluated points. Three of every `GLOBAL_EVERY`
  model proposals maximise EI inside it; the fourth maximises EI over the whole space.
* Every `EXPAND_EVERY`-th proposal expands the elite best-first: the neighbour with the highest
  EI of the best evaluated point whose neighbourhood is not yet exhausted.
* Twins: on a deterministic objective (simulated cycles, a replayed file) a knob can change
  nothing where it does not matter (the buffer depth where loads never run ahead), and points
  differing only in it measure exactly the same. The elite keeps one point of each exact tie;
  once `INERT_EVIDENCE` groups of points that differ only in one parameter have tied, and none
  has differed, that parameter counts as inert, and no proposal is a twin of an evaluated point
  (the same but for inert ones). On the spatial backend's axpby space (aie-like-4x8), where the
  buffer depth is inert, 9 of the 40 trials went to twins (median over 20 seeds; now 2), and
  the worst seed went from 7.8% off the optimum to 1.5%
  (`python benchmarks/tune_spatial.py --arch aie-like-4x8 --seeds 20`). One tie was too little
  evidence: on gemm_bias_gelu there, where the depth matters for some tiles, 2 of 20 seeds
  then stopped 4.3% off (none with two).
  Measured GPU timings never tie exactly, so tuning on a GPU is unchanged.

Why: tuning spaces have parameters along which the time is close to noise (a block size that
divides the problem or not). No smooth model predicts those, and a global EI spends its
proposals on the corners of the space, where the model is least sure. The optimum is often one
such jump away from good, but not the best, points. Replayed over 40 seeds
(`python benchmarks/replay.py --strategies bo+local --seeds 40`), the trust region cut the
median evaluations to within 2% on the A100 convolution space from 349 to 167, and the
geometric-mean ratio to random search from 12.5x to 17.6x (with the finite-difference fit and
scipy 1.14; see `GP._nll`).
"""

from __future__ import annotations

import math
import random

import numpy as np
from scipy.linalg import cho_factor, cho_solve, solve_triangular
from scipy.optimize import minimize
from scipy.special import erfc

from autotune.space import Evaluator, Point, SearchSpace
from autotune.strategies.local import hamming_neighbors
from autotune.strategies.registry import register

ENUMERATE_LIMIT = 2_000_000  # raw product size up to which the valid points are enumerated
SAMPLED_CANDIDATES = 4096  # per step, for spaces too big to enumerate
SQRT5 = math.sqrt(5.0)
REFIT_GROWTH = 1.5  # refit the hyperparameters when the data grew by half
EXPAND_EVERY = 3  # bo+local: every third proposal expands the elite
TRUST_ELITE = 10  # bo+local: the trust region is the neighbourhood of the 10 best points
GLOBAL_EVERY = 4  # bo+local: one model proposal in four is global
PREFETCH = 16  # next-step candidates (by expected improvement) hinted for compiling ahead
INERT_EVIDENCE = 2  # tied groups it takes (and no group that differed) to call a knob inert


def n_init(n_free: int, n_points: int | None = None) -> int:
    """The size of the random start. On a small space (`n_points` valid configs) a fixed
    design would spend a third of the space before the model says anything."""
    n = min(20, max(8, 2 * n_free))
    return n if n_points is None else min(n, max(3, n_points // 8))


def _matern_of(r: np.ndarray) -> np.ndarray:
    """The Matern-5/2 correlation at scaled distances `r`."""
    return (1.0 + SQRT5 * r + 5.0 / 3.0 * r * r) * np.exp(-SQRT5 * r)


def _matern(a: np.ndarray, b: np.ndarray, ls: np.ndarray) -> np.ndarray:
    a, b = a / ls, b / ls
    r2 = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * (a @ b.T)
    return _matern_of(np.sqrt(np.maximum(r2, 0.0)))


class GP:
    """A zero-mean GP on standardised targets; hyperparameters by marginal likelihood."""

    def __init__(self, dim: int) -> None:
        self.log_ls = np.full(dim, math.log(0.5))
        self.log_sf2 = 0.0
        self.log_sn2 = math.log(1e-3)

    def _nll(self, theta: np.ndarray, x: np.ndarray, y: np.ndarray
             ) -> tuple[float, np.ndarray]:
        """The negative log marginal likelihood (less a constant) and its gradient in theta
        (log length scales, log signal and log noise variance). The gradient is analytic: on
        finite differences, scipy 1.15's rewritten L-BFGS-B ended every fit at its iteration
        limit far from the optimum, and the replays depended on the scipy version (shared
        spaces, 20 seeds: 18.0x fewer evaluations than random with scipy 1.14, 14.8x with
        1.17; with the gradient, 17.0x with either)."""
        d = x.shape[1]
        ls, sf2, sn2 = np.exp(theta[:d]), math.exp(theta[d]), math.exp(theta[d + 1])
        diff2 = (x[:, None, :] - x[None, :, :]) ** 2 / ls ** 2  # (n, n, d)
        r = np.sqrt(diff2.sum(-1))
        m = _matern_of(r)
        k = sf2 * m + (sn2 + 1e-8) * np.eye(len(x))
        try:
            c = cho_factor(k, lower=True, check_finite=False)
        except np.linalg.LinAlgError:
            return 1e10, np.zeros_like(theta)
        alpha = cho_solve(c, y, check_finite=False)
        nll = float(0.5 * y @ alpha + np.log(np.diag(c[0])).sum())
        w = cho_solve(c, np.eye(len(x)), check_finite=False) - np.outer(alpha, alpha)
        grad = np.empty_like(theta)
        # dK/dlog(l_d) = sf2 * 5/3 * (1 + sqrt5 r) exp(-sqrt5 r) * (x_d - x'_d)^2 / l_d^2
        slope = sf2 * 5.0 / 3.0 * (1.0 + SQRT5 * r) * np.exp(-SQRT5 * r)
        grad[:d] = 0.5 * np.einsum("ij,ijd->d", w * slope, diff2)
        grad[d] = 0.5 * float((w * (sf2 * m)).sum())
        grad[d + 1] = 0.5 * sn2 * float(np.trace(w))
        return nll, grad

    def fit(self, x: np.ndarray, y: np.ndarray) -> None:
        d = x.shape[1]
        theta0 = np.concatenate([self.log_ls, [self.log_sf2, self.log_sn2]])
        bounds = [(math.log(0.05), math.log(20.0))] * d + [(math.log(0.05), math.log(20.0)),
                                                            (math.log(1e-6), math.log(0.5))]
        res = minimize(self._nll, theta0, args=(x, y), jac=True, method="L-BFGS-B",
                       bounds=bounds, options={"maxiter": 25})
        theta = res.x if res.fun < self._nll(theta0, x, y)[0] else theta0
        self.log_ls, self.log_sf2, self.log_sn2 = theta[:d], float(theta[d]), float(theta[d + 1])

    def condition(self, x: np.ndarray, y: np.ndarray) -> None:
        self.x = x
        k = math.exp(self.log_sf2) * _matern(x, x, np.exp(self.log_ls))
        k += (math.exp(self.log_sn2) + 1e-8) * np.eye(len(x))
        self.c = cho_factor(k, lower=True, check_finite=False)
        self.c = (np.tril(self.c[0]), True)
        self.alpha = cho_solve(self.c, y)

    def predict(self, xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        sf2 = math.exp(self.log_sf2)
        ks = sf2 * _matern(xs, self.x, np.exp(self.log_ls))
        mu = ks @ self.alpha
        v = solve_triangular(self.c[0], ks.T, lower=True, check_finite=False)
        var = np.maximum(sf2 - (v * v).sum(0), 1e-12)
        return mu, np.sqrt(var)


def expected_improvement(mu: np.ndarray, sd: np.ndarray, best: float) -> np.ndarray:
    z = (best - mu) / sd
    cdf = 0.5 * erfc(-z / math.sqrt(2.0))
    pdf = np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    return sd * (z * cdf + pdf)


@register("bo")
def bo(space: SearchSpace, evaluate: Evaluator, seed: int, initial: list[Point]) -> None:
    _Search(space, evaluate, seed, expand_every=0, trust=False).run(initial)


@register("bo+local")
def bo_local(space: SearchSpace, evaluate: Evaluator, seed: int, initial: list[Point]) -> None:
    """BO in a trust region around the elite, with a best-first expansion of the elite."""
    _Search(space, evaluate, seed, expand_every=EXPAND_EVERY, trust=True).run(initial)


class _Search:
    """One BO search: the encoding and candidate pool, the GP, and what it learned of the
    evaluated points (the elite's exhausted neighbourhoods, the inert parameters). `run` starts
    with the initial and random points, then proposes one point per evaluation."""

    def __init__(self, space: SearchSpace, evaluate: Evaluator, seed: int, expand_every: int,
                 trust: bool) -> None:
        self.space, self.evaluate = space, evaluate
        self.expand_every, self.trust = expand_every, trust
        self.rng = random.Random(seed)
        # the hints draw from their own stream: they must not move the search's
        self.lookahead_rng = random.Random(seed + 1)
        self.free = [p for p in space.params if len(p.values) > 1]
        self.scale = np.array([1.0 / (len(p.values) - 1) for p in self.free])
        self.enumerated = space.size_upper_bound <= ENUMERATE_LIMIT
        self.pool: list[Point] = list(space.points()) if self.enumerated else []
        self.pool_x = self.enc_all(self.pool)
        self.pool_index = {SearchSpace.key(p): i for i, p in enumerate(self.pool)}
        self.unseen = np.ones(len(self.pool), dtype=bool)
        self.marked = 0  # history entries already struck from `unseen`
        self.gp = GP(len(self.free))
        self.fitted_at = 0
        self.model_best = 0.0  # the best standardised y of the model's last conditioning
        self.exhausted: set[tuple] = set()  # elite points whose every neighbour was evaluated
        self.neighbour_lists: dict[tuple, list[Point]] = {}  # validity tests can be costly
        # Per parameter: for each setting of the other parameters, the points measured there
        # and the distinct values they measured.
        self.siblings: dict[str, dict[tuple, tuple[int, set[float]]]] = {
            p.name: {} for p in self.free}
        self.counted = 0  # history entries already in `siblings`

    def enc(self, point: Point) -> np.ndarray:
        return np.array([p.values.index(point[p.name]) for p in self.free],
                        dtype=float) * self.scale

    def enc_all(self, points: list[Point]) -> np.ndarray:
        return np.array([self.enc(p) for p in points]).reshape(len(points), len(self.free))

    def run(self, initial: list[Point]) -> None:
        self.start(initial)
        evaluate = self.evaluate
        step = proposals = 0
        while not evaluate.done:
            step += 1
            if not self.free or not any(v is not None and v > 0 for _, v in evaluate.history):
                q = self.space.sample(self.rng)
                if q is None or SearchSpace.key(q) in evaluate.results:
                    return
                evaluate(q)
                continue
            self.model_best = self.model()
            q = None
            if self.expand_every and step % self.expand_every == 0:
                q = self.elite_neighbour()
            if q is None:
                proposals += 1
                q = self.proposal(proposals)
                if q is None:
                    return
            self.announce(q, step, proposals)
            evaluate(q)

    def start(self, initial: list[Point]) -> None:
        """The initial points, then uniform random ones up to n_init, drawn up front so they
        can be compiled ahead while the first ones are measured."""
        space, evaluate = self.space, self.evaluate
        start = [p for p in initial if space.contains(p)]
        planned = {SearchSpace.key(p) for p in start} | set(evaluate.results)
        stale = 0
        size = n_init(len(self.free), len(self.pool) if self.enumerated else None)
        while len(evaluate.history) + len(planned - set(evaluate.results)) < size and \
                stale < 1000:
            q = space.sample(self.rng)
            if q is None:
                break
            if SearchSpace.key(q) in planned:
                stale += 1
                continue
            planned.add(SearchSpace.key(q))
            start.append(q)
            stale = 0
        evaluate.prefetch(start)
        for point in start:
            if evaluate.done:
                return
            evaluate(point)

    def proposal(self, proposals: int) -> Point | None:
        """The model's choice: the best EI in the trust region (bo+local, three proposals in
        every `GLOBAL_EVERY`), else over the whole space; None when no candidate is left."""
        if self.trust and proposals % GLOBAL_EVERY:
            local = self.trust_region()
            if local:
                return self.best_ei(local, self.enc_all(local))
        if self.enumerated:
            cand, cand_x = self.unseen_pool()
        else:
            cand = _sampled_candidates(self.space, self.evaluate, self.rng)
            cand_x = self.enc_all(cand)
        return self.best_ei(cand, cand_x) if cand else None

    def model(self) -> float:
        """Fit (when the data grew enough) and condition the GP; the best standardised y."""
        history = self.evaluate.history
        vals = [v for _, v in history if v is not None and v > 0]
        worst = math.log(max(vals))
        x = self.enc_all([p for p, _ in history])
        y = np.array([math.log(v) if v is not None and v > 0 else worst for _, v in history])
        ys = (y - y.mean()) / (y.std() or 1.0)
        if len(ys) >= self.fitted_at * REFIT_GROWTH:
            self.gp.fit(x, ys)
            self.fitted_at = len(ys)
        self.gp.condition(x, ys)
        return float(ys.min())

    def best_ei(self, cand: list[Point], cand_x: np.ndarray) -> Point:
        mu, sd = self.gp.predict(cand_x)
        ei = expected_improvement(mu, sd, self.model_best)
        top = np.flatnonzero(ei >= ei.max() * (1 - 1e-9))
        return cand[int(top[self.rng.randrange(len(top))])]

    def ranked(self) -> list[Point]:
        """The evaluated points, best first; of points that measured exactly the same, the
        first evaluated only (twins: a knob that changed nothing there)."""
        history = self.evaluate.history
        order = sorted((v, i) for i, (_, v) in enumerate(history) if v is not None)
        out, last = [], None
        for v, i in order:
            if v != last:
                out.append(history[i][0])
            last = v
        return out

    @staticmethod
    def without(point: Point, names: set[str]) -> tuple:
        """The point's key with those parameters left out."""
        return tuple(kv for kv in SearchSpace.key(point) if kv[0] not in names)

    def inert(self) -> set[str]:
        """Parameters that changed nothing so far: `INERT_EVIDENCE` groups of points differed
        only in one, and every such group measured exactly the same. A deterministic objective
        (simulated cycles, a replayed file) has such knobs where they do not matter (the buffer
        depth when loads never run ahead); moves along them waste evaluations. Timings never
        tie exactly."""
        for point, v in self.evaluate.history[self.counted:]:
            if v is not None:
                for name, groups in self.siblings.items():
                    rest = self.without(point, {name})
                    n, values = groups.get(rest, (0, set()))
                    groups[rest] = (n + 1, values | {v})
        self.counted = len(self.evaluate.history)
        return {name for name, groups in self.siblings.items()
                if sum(n > 1 for n, _ in groups.values()) >= INERT_EVIDENCE
                and all(len(values) == 1 for _, values in groups.values())}

    def fresh(self, points: list[Point]) -> list[Point]:
        """The points neither evaluated nor twins of evaluated ones (the same but for the inert
        parameters: their outcome is known)."""
        new = [q for q in points if SearchSpace.key(q) not in self.evaluate.results]
        skip = self.inert()
        if not skip:
            return new
        known = {self.without(p, skip) for p, _ in self.evaluate.history}
        return [q for q in new if self.without(q, skip) not in known]

    def neighbours(self, point: Point) -> list[Point]:
        key = SearchSpace.key(point)
        if key not in self.neighbour_lists:
            self.neighbour_lists[key] = hamming_neighbors(self.space, point)
        return self.neighbour_lists[key]

    def trust_region(self) -> list[Point]:
        """The unevaluated Hamming neighbours of the TRUST_ELITE best points."""
        out: dict[tuple, Point] = {}
        for point in self.ranked()[:TRUST_ELITE]:
            for q in self.fresh(self.neighbours(point)):
                out.setdefault(SearchSpace.key(q), q)
        return list(out.values())

    def elite_neighbour(self) -> Point | None:
        """The expansion: the best-EI unevaluated neighbour of the best evaluated point whose
        neighbourhood is not exhausted (None if every one is)."""
        for point in self.ranked():
            if SearchSpace.key(point) in self.exhausted:
                continue
            new = self.fresh(self.neighbours(point))
            if new:
                return self.best_ei(new, self.enc_all(new))
            self.exhausted.add(SearchSpace.key(point))
        return None

    def unseen_pool(self) -> tuple[list[Point], np.ndarray]:
        """The enumerated points not evaluated yet, less twins of evaluated ones (while any
        other is left), and their encodings."""
        history = self.evaluate.history
        for p, _ in history[self.marked:]:
            i = self.pool_index.get(SearchSpace.key(p))
            if i is not None:
                self.unseen[i] = False
        self.marked = len(history)
        idx = np.flatnonzero(self.unseen)
        skip = self.inert()
        if skip and len(idx):  # leave out twins of evaluated points (as `fresh`, vectorised)
            active = [j for j, p in enumerate(self.free) if p.name not in skip]
            radix = np.cumprod([1] + [len(self.free[j].values) for j in active])[:len(active)]

            def codes(x: np.ndarray) -> np.ndarray:
                return np.rint(x[:, active] / self.scale[active]).astype(np.int64) @ radix

            known = codes(self.enc_all([p for p, _ in history]))
            new = idx[~np.isin(codes(self.pool_x[idx]), known)]
            idx = new if len(new) else idx  # only twins left: the budget goes to them
        return [self.pool[i] for i in idx], self.pool_x[idx]

    def announce(self, choice: Point, step: int, proposals: int) -> None:
        """Hint what the next step will likely propose, before measuring `choice`: the best
        candidates, by the current model's expected improvement, of the next step's branch."""
        if not self.evaluate.wants_prefetch:
            return
        if self.expand_every and (step + 1) % self.expand_every == 0:
            key = SearchSpace.key(choice)
            ahead = next((new for new in (
                [q for q in self.fresh(self.neighbours(p)) if SearchSpace.key(q) != key]
                for p in self.ranked()) if new), [])
        else:
            ahead = self.trust_region() if self.trust and (proposals + 1) % GLOBAL_EVERY else []
            if not ahead:
                ahead = self.unseen_pool()[0] if self.enumerated else _sampled_candidates(
                    self.space, self.evaluate, self.lookahead_rng)
        ahead = [q for q in ahead if q != choice]
        if ahead:
            mu, sd = self.gp.predict(self.enc_all(ahead))
            order = np.argsort(-expected_improvement(mu, sd, self.model_best), kind="stable")
            ahead = [ahead[int(i)] for i in order[:PREFETCH]]
        self.evaluate.prefetch([choice] + ahead)


def _sampled_candidates(space: SearchSpace, evaluate: Evaluator,
                        rng: random.Random) -> list[Point]:
    out: dict[tuple, Point] = {}
    for _ in range(SAMPLED_CANDIDATES):
        q = space.sample(rng, tries=100)
        if q is not None and SearchSpace.key(q) not in evaluate.results:
            out.setdefault(SearchSpace.key(q), q)
    ranked = sorted((v, i) for i, (_, v) in enumerate(evaluate.history) if v is not None)
    for _, i in ranked[:5]:
        for q in hamming_neighbors(space, evaluate.history[i][0]):
            if SearchSpace.key(q) not in evaluate.results:
                out.setdefault(SearchSpace.key(q), q)
    return list(out.values())

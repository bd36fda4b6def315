"""The tuner's cost model: which candidate to measure next.

A trial costs a build (lowering and compiling, about a second) and a timing; the
model spends few of them. It predicts the log of a candidate's time as

    prior(knobs) + (learned effect of each knob's value)

- the prior is analytic, from the machine model: a register tile whose accumulators
  do not fit the vector registers (with a vector of the other operand per column and
  a broadcast) spills; one with fewer accumulators than the FMA chains that keep the
  units busy waits on their latency; and every knob moved away from the
  auto-scheduler's choice costs a little (the rules are a good first guess);
- the learned part is a ridge regression on the knob values (one indicator per value
  of each knob), fitted to the log-times measured so far on this machine and, at a
  third of the weight, to the records of other machines in the log (each machine
  centred on its own mean: their speeds differ, the effects of a knob much less);
- the prior's weight is fitted too (one more column, pulled towards 1 by the ridge,
  kept in [0, 1.5]): where the measurements contradict it (a depthwise convolution's
  one-row tiles are the fastest although their short chains of FMAs "wait on the
  latency": the reduction is nine taps, and the iterations around it overlap), the
  model stops trusting it instead of never measuring what it advises against.

Why this and not a boosted-tree model over program features (TVM's): the knobs of
tdsl's templates are few and categorical, and their effects on the log-time are
mostly additive (a tile size, a vector width and a parallel loop each change it by
a factor), which a linear model learns from a dozen points; the interactions it
misses are the ones the analytic prior knows (a tile's rows x columns against the
registers). It needs nothing beyond numpy, is deterministic, and costs
milliseconds per proposal. The next candidate is the one predicted fastest, with a
small bonus for knob values not measured yet; and every EXPLORE-th proposal is the
best-scored candidate with a value not measured yet, however bad the prediction
(`propose(..., novel=True)`), so every value is measured early.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from typing import Any

import numpy as np

from ..schedule import Template
from .machine import Machine, same_machine

# candidates scored per proposal: every combination up to this many, else a sample
_ENUMERATE = 5_000
_SAMPLE = 2_000
FOREIGN_WEIGHT = 1 / 3
RIDGE = 1.0
NOVELTY = 0.03  # log-time bonus per knob value not measured yet
PRIOR_RIDGE = 1.0  # how hard the prior's fitted weight is pulled towards 1
PRIOR_WEIGHT = (0.0, 1.5)  # the bounds of that weight
EXPLORE = 4  # every EXPLORE-th proposal of a search measures a value not measured yet
DEFAULT_PULL = 0.02  # log-time cost per knob moved from the auto-scheduler's choice


def _key(values: dict[str, Any]) -> str:
    return json.dumps(values, sort_keys=True)


def _tile_knobs(template: Template) -> list[tuple[str, str]]:
    """(rows knob, columns knob) pairs of the auto-scheduler's register tiles: a stage's
    two "<stage>.tile_<dim>" knobs, the columns the one whose choices are multiples of
    its first (the vector lanes, 4 or more)."""
    by_stage: dict[str, list[str]] = {}
    for name in template.knobs:
        stage, _, what = name.rpartition(".")
        if what.startswith("tile_"):
            by_stage.setdefault(stage, []).append(name)
    pairs = []
    for names in by_stage.values():
        if len(names) != 2:
            continue
        a, b = (template.knobs[n] for n in names)

        def vector(c: tuple[Any, ...]) -> bool:
            return isinstance(c[0], int) and c[0] >= 4 and all(
                isinstance(x, int) and x % c[0] == 0 for x in c)

        if vector(b) and not vector(a):
            pairs.append((names[0], names[1]))
        elif vector(a) and not vector(b):
            pairs.append((names[1], names[0]))
    return pairs


class Model:
    """Scores the candidates of one template on one machine (see the module)."""

    def __init__(self, template: Template, machine: Machine, seed: int = 0):
        self.template, self.machine = template, machine
        self.names = list(template.knobs)
        self.defaults = dict(template.defaults)
        self.tiles = _tile_knobs(template)
        self.rng = random.Random(seed)
        # one column per (knob, value)
        self.columns: dict[tuple[str, str], int] = {}
        for n, choices in template.knobs.items():
            for c in choices:
                self.columns[(n, repr(c))] = len(self.columns)
        self.X: list[np.ndarray] = []
        self.p: list[float] = []  # the prior of each observation
        self.y: list[float] = []
        self.w: list[float] = []
        self.group: list[str] = []
        self.seen: set[tuple[str, str]] = set()
        self.coef: np.ndarray | None = None
        self._every: list[dict[str, Any]] | None = None  # the whole space, when it is small
        self.mean = 0.0
        self.prior_weight = 1.0
        self.prior_mean = 0.0  # of this machine's observations

    # ------------------------------------------------------------ features

    def features(self, values: dict[str, Any]) -> np.ndarray:
        x = np.zeros(len(self.columns))
        for n in self.names:
            col = self.columns.get((n, repr(values.get(n))))
            if col is not None:
                x[col] = 1.0
        return x

    def prior(self, values: dict[str, Any]) -> float:
        """The analytic part of the predicted log-time (0 for the defaults' tiles)."""
        p = DEFAULT_PULL * sum(1 for n in self.names if values.get(n) != self.defaults.get(n))
        for rows_knob, cols_knob in self.tiles:
            rows, cols = values.get(rows_knob), values.get(cols_knob)
            lanes = self.template.knobs[cols_knob][0]
            if not isinstance(rows, int) or not isinstance(cols, int):
                continue
            nv = max(1, cols // lanes)
            acc = rows * nv
            need = acc + nv + 1
            if need > self.machine.registers:  # spills: loads and stores in the inner loop
                p += 0.3 + 0.7 * (need - self.machine.registers) / self.machine.registers
            if acc < self.machine.fma_chains:  # the FMA latency is not hidden
                p += 0.5 * math.log(self.machine.fma_chains / acc)
            p -= 0.1 * math.log(acc / (rows + nv))  # more FMAs per load
        return p

    # ------------------------------------------------------------ learning

    def observe(self, values: dict[str, Any], seconds: float, machine: object,
                here: object) -> None:
        """Add a measurement (of this machine, or at a lower weight of another)."""
        if not all(n in values and self.template.knob(n).accepts(values[n]) for n in self.names):
            return  # a record of another template
        mine = same_machine(machine, here)
        self.X.append(self.features(values))
        self.p.append(self.prior(values))
        self.y.append(math.log(seconds) - self.p[-1])
        self.w.append(1.0 if mine else FOREIGN_WEIGHT)
        self.group.append("here" if mine else json.dumps(machine, sort_keys=True))
        if mine:
            self.seen.update((n, repr(values[n])) for n in self.names)
        self.coef = None

    def _fit(self) -> None:
        if not self.y:
            self.coef, self.mean = np.zeros(len(self.columns)), 0.0
            self.prior_weight, self.prior_mean = 1.0, 0.0
            return
        X, y, w = np.array(self.X), np.array(self.y), np.array(self.w)
        p = np.array(self.p)
        groups = np.array(self.group)
        for g in set(self.group):  # each machine centred on its own mean
            sel = groups == g
            y[sel] -= y[sel].mean()
            p[sel] -= p[sel].mean()
        here = groups == "here"
        self.mean = float(np.array(self.y)[here].mean()) if here.any() else 0.0
        self.prior_mean = float(np.array(self.p)[here].mean()) if here.any() else 0.0
        # y = log-time - prior; its last column fits the prior's weight less 1
        sw = np.sqrt(w)[:, None]
        A = np.hstack([X, p[:, None]]) * sw
        b = y * sw[:, 0]
        ridge = np.full(A.shape[1], RIDGE)
        ridge[-1] = PRIOR_RIDGE
        coef = np.linalg.solve(A.T @ A + np.diag(ridge), A.T @ b)
        self.coef = coef[:-1]
        self.prior_weight = float(np.clip(1.0 + coef[-1], *PRIOR_WEIGHT))

    def predict(self, values: dict[str, Any]) -> float:
        """Predicted log-seconds (up to a constant when nothing here is measured)."""
        if self.coef is None:
            self._fit()
        assert self.coef is not None
        p = self.prior(values)
        return (self.mean + float(self.features(values) @ self.coef) + self.prior_mean
                + self.prior_weight * (p - self.prior_mean))

    def score(self, values: dict[str, Any]) -> float:
        """What the next proposal minimises: the prediction less the novelty bonus."""
        novel = sum(1 for n in self.names if (n, repr(values[n])) not in self.seen)
        return self.predict(values) - NOVELTY * novel

    # ------------------------------------------------------------ proposals

    def pool(self, around: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The candidates to score: every combination when there are few, else a random
        sample and every single-knob move from each of `around`."""
        knobs = self.template.knobs
        if self.template.space_size <= _ENUMERATE:
            if self._every is None:  # the same list at every proposal: made once
                self._every = self._unique(
                    dict(zip(self.names, c)) for c in itertools.product(*knobs.values()))
            return self._every
        out = [{n: self.rng.choice(knobs[n]) for n in self.names} for _ in range(_SAMPLE)]
        for base in around:
            for n in self.names:
                for c in knobs[n]:
                    out.append({**base, n: c})
        return self._unique(out)

    def _unique(self, candidates) -> list[dict[str, Any]]:
        """One candidate per schedule: a branch's knobs do not matter when it is not
        chosen."""
        unique: dict[str, dict[str, Any]] = {}
        for values in candidates:
            v = self.template.canonical(values)
            unique.setdefault(_key(v), v)
        return list(unique.values())

    def propose(self, skip: set[str], around: list[dict[str, Any]],
                novel: bool = False) -> dict[str, Any] | None:
        """The best-scored candidate whose key is not in `skip` (with `novel`, among
        those with a knob value not measured here yet, if there is any); None when none
        is left."""
        pool = [v for v in self.pool(around) if _key(v) not in skip]
        if novel:
            fresh = [v for v in pool if any((n, repr(v[n])) not in self.seen for n in self.names)]
            pool = fresh or pool
        best, best_score = None, math.inf
        for values in pool:
            s = self.score(values)
            if s < best_score:
                best, best_score = values, s
        return None if best is None else dict(best)  # the pool may be kept: a copy

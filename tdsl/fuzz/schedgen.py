"""Random schedules over every primitive, placed as a hostile user would.

Runs in the child (it asks the schedule for its loops). Four phases: stage-adding
primitives (cache_write, cache_read, rfactor of stages and updates, layout, of a
stage or of the cache just made, whose copy then transposes, now and then as a
register tile computed per tile of its consumer; then
fuse_updates and atomic on some updates), loop primitives on every
schedulable (split, tile, reorder, fuse, vectorize with and without
reassociate, unroll, parallel), placement of every intermediate (root, inline,
compute_at, store_at — preferring parallel and fused loops of the consumer,
nesting compute_at), then loop primitives again on what was placed. A
primitive the schedule refuses at once (`td.ScheduleError`) is left out; what
is refused only at build time makes a "rejected" trial.
"""

from __future__ import annotations

import tdsl as td

FACTORS = (1, 2, 3, 4, 5, 7, 8, 16)


class SchedGen:
    """Builds `ops`, a list of `[method, args, kwargs]`, applied to `s` as it goes."""

    def __init__(self, rng, spec, s, send=None):
        self.rng, self.spec, self.s = rng, spec, s
        self.send = send or (lambda msg: None)
        self.ops: list = []
        self.marked: dict[str, list[str]] = {}  # stage -> parallel/fused loop names
        self.added: list[tuple[str, str]] = []  # (new stage, its consumer)
        self.vectorized: dict[str, list[str]] = {}
        self.new_updates: list[str] = []  # updates a restaging primitive added
        self.tiles: dict[str, str] = {}  # cache -> consumer, as `register_tile` left them

    def pick(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def chance(self, p):
        return bool(self.rng.random() < p)

    def attempt(self, method, *args, **kwargs) -> bool:
        """Append a primitive unless the schedule refuses it; primitives on updates
        are also proved legal at once (most random ones break a dependence)."""
        # the parent holds the ops so far: a hang or crash in here is reproducible
        self.send({"type": "ops", "ops": [*self.ops, [method, list(args), kwargs]]})
        try:
            s = getattr(self.s, method)(*args, **kwargs)
            if args and isinstance(args[0], str) and "." in args[0] and not self.chance(0.1):
                s.check()
        except td.ScheduleError:
            return False
        self.s = s
        self.ops.append([method, list(args), kwargs])
        return True

    def loops(self, stage) -> list[str]:
        try:
            return self.s.loops(stage)
        except td.ScheduleError:
            return []

    # ------------------------------------------------------------ names

    def computes(self):
        return [st["name"] for st in self.spec["stages"] if st["kind"] == "compute"]

    def updates(self):
        return [st["name"] for st in self.spec["stages"] if st["kind"] == "update"]

    def readers(self, name):
        from .render import tensors_read

        found = []
        for st in self.spec["stages"]:
            reader = st["name"] if st["kind"] == "compute" else st["stage"]
            if name in tensors_read(st) and reader != name and reader not in found:
                found.append(reader)
        return found

    def all_stages(self):
        return self.computes() + self.updates() + self.new_updates + [a for a, _ in self.added]

    # ------------------------------------------------------------ phases

    def restage(self):
        for n in range(int(self.rng.integers(0, 3))):
            op = self.pick(("cache_write", "cache_read", "rfactor", "rfactor", "layout",
                            "rfactor_update"))
            stage = self.pick(self.computes())
            if op == "rfactor_update" and self.updates():
                u = self.pick(self.updates())
                loops = self.loops(u)
                if loops and self.attempt("rfactor", u, self.pick(loops), self.pick(FACTORS),
                                          name=f"rf{n}"):
                    self.new_updates.append(f"rf{n}.u0")
                continue
            if op == "cache_write" and self.attempt("cache_write", stage, name=f"cw{n}"):
                self.added.append((f"cw{n}", stage))
                if self.chance(0.4):  # a register tile, stored through its transpose
                    self.register_tile(stage, f"cw{n}")
                elif self.chance(0.5):  # the cache in another layout: its copy transposes
                    self.layout(f"cw{n}")
                    loops = self.loops(stage)
                    if loops and self.chance(0.5):  # and the copy is vectorized
                        self.attempt("vectorize", stage, loops[-1])
            elif op == "cache_read":
                sources = [t["name"] for t in self.spec["inputs"]] + self.computes()
                source = self.pick(sources)
                readers = self.readers(source) or [stage]
                reader = self.pick(readers)
                if self.attempt("cache_read", source, [reader], name=f"cr{n}"):
                    self.added.append((f"cr{n}", reader))
                    if self.chance(0.5):
                        self.layout(f"cr{n}")
            elif op == "rfactor":
                stage = self.pick([c for c in self.computes() if any(
                    lp.startswith("k") for lp in self.loops(c))] or [stage])
                reds = [lp for lp in self.loops(stage) if lp.startswith("k")]
                if reds and self.attempt("rfactor", stage, self.pick(reds), self.pick(FACTORS),
                                         name=f"rf{n}"):
                    self.added.append((f"rf{n}", stage))
            elif op == "layout":
                self.layout(stage)

    def register_tile(self, stage, cache):
        """Stage's last two or three loops split, their inner loops innermost, the
        last vectorized; `cache` (its cache_write) computed per tile and laid out with
        the first of them fastest: storing each tile is a copy to the transpose
        (`lower.passes.transpose.transposing_copy`; with three, conv2d's `k_i y_i x_i` from
        Acc[y, x, k], a loop between the copy's two); the factors mostly divide the
        loops (a tile cut short at an edge is not a constant block)."""
        dims = [lp for lp in self.loops(stage) if not lp.startswith("k")]
        if len(dims) < 2:
            return
        chosen = dims[-3:] if len(dims) >= 3 and self.chance(0.5) else dims[-2:]
        for d in chosen:
            extent = self.spec["dims"].get(d)  # a number, or a size's name
            whole = [f for f in range(4, 65) if isinstance(extent, int) and extent % f == 0]
            factor = self.pick(whole) if whole and self.chance(0.7) else self.pick(
                (4, 4, 5, 7, 8, 8, 16))
            if not self.attempt("split", stage, d, factor):
                return
        inner = [f"{d}_i" for d in chosen]
        outer = [lp for lp in self.loops(stage) if lp not in inner]
        if not self.attempt("reorder", stage, *outer, *inner):
            return
        if self.attempt("vectorize", stage, inner[-1]):
            self.vectorized.setdefault(stage, []).append(inner[-1])
        rest = [lp for lp in self.loops(cache) if not lp.startswith("k") and lp not in chosen]
        self.attempt("layout", cache, *rest, *chosen[1:], chosen[0])
        if outer and self.attempt("compute_at", cache, stage, outer[-1]):
            self.tiles[cache] = stage

    def layout(self, stage):
        dims = [lp for lp in self.loops(stage) if not lp.startswith("k")]
        if dims:
            self.attempt("layout", stage, *[dims[i] for i in self.rng.permutation(len(dims))])

    def loop_ops(self, stage, count):
        for _ in range(count):
            loops = self.loops(stage)
            if not loops:
                return
            op = self.pick(("split", "split", "tile", "reorder", "fuse", "vectorize", "unroll",
                            "parallel", "parallel", "tile_fuse"))
            getattr(self, "op_" + op)(stage, loops)

    def op_split(self, stage, loops):
        self.attempt("split", stage, self.pick(loops), self.pick(FACTORS))

    def op_tile(self, stage, loops):
        if len(loops) >= 2:
            n = int(self.rng.integers(len(loops) - 1))
            self.attempt("tile", stage, **{loops[n]: self.pick(FACTORS),
                                           loops[n + 1]: self.pick(FACTORS)})

    def op_reorder(self, stage, loops):
        if len(loops) >= 2:
            self.attempt("reorder", stage, *[loops[i] for i in self.rng.permutation(len(loops))])

    def op_fuse(self, stage, loops):
        if len(loops) >= 2:
            n = int(self.rng.integers(len(loops) - 1))
            if self.attempt("fuse", stage, loops[n], loops[n + 1]):
                self.marked.setdefault(stage, []).append(f"{loops[n]}_{loops[n + 1]}")

    def op_tile_fuse(self, stage, loops):
        """Tile two loops, fuse the two inner ones, maybe move the fused loop outside
        an unfused one: the shapes that broke bounds inference for compute_at."""
        if len(loops) < 2:
            return
        n = int(self.rng.integers(len(loops) - 1))
        a, b = loops[n], loops[n + 1]
        if not self.attempt("tile", stage, **{a: self.pick(FACTORS), b: self.pick(FACTORS)}):
            return
        if self.attempt("fuse", stage, f"{a}_i", f"{b}_i"):
            fused = f"{a}_i_{b}_i"
            self.marked.setdefault(stage, []).append(fused)
            if self.chance(0.5):
                order = [lp for lp in self.loops(stage) if lp != fused]
                order.insert(int(self.rng.integers(len(order) + 1)), fused)
                self.attempt("reorder", stage, *order)

    def op_vectorize(self, stage, loops):
        loop = self.pick(loops)
        if self.attempt("vectorize", stage, loop, **self.reassociate(loop)):
            self.vectorized.setdefault(stage, []).append(loop)

    def op_unroll(self, stage, loops):
        self.attempt("unroll", stage, self.pick(loops))

    def op_parallel(self, stage, loops):
        loop = self.pick(loops)
        if self.attempt("parallel", stage, loop, **self.reassociate(loop)):
            self.marked.setdefault(stage, []).append(loop)

    def reassociate(self, loop):
        return {"reassociate": True} if loop.startswith("k") and self.chance(0.5) else {}

    def place(self, stage, consumer):
        readers = self.readers(stage) if consumer is None else [consumer]
        if not readers or self.chance(0.08):
            readers = self.computes() + [a for a, _ in self.added]
        consumer = self.pick(readers)
        loops = self.outside_vectors(consumer)
        r = self.rng.random()
        if len(readers) > 1 and r < 0.6:
            r = self.rng.random() * 0.4  # compute_at in one of several readers is refused
        if r < 0.2 or not loops:
            return
        if r < 0.4:
            self.attempt("compute_inline", stage)
            return
        hot = [lp for lp in self.marked.get(consumer, []) if lp in loops]
        n = loops.index(self.pick(hot)) if hot and self.chance(0.6) else int(
            self.rng.integers(len(loops)))
        if self.attempt("compute_at", stage, consumer, loops[n]) and self.chance(0.3):
            self.attempt("store_at", stage, consumer, loops[int(self.rng.integers(n + 1))])

    def outside_vectors(self, stage):
        """The stage's loops, without those inside a vectorized loop (compute_at there
        is refused), unless a hostile mood strikes."""
        loops = self.loops(stage)
        inner = [loops.index(v) for v in self.vectorized.get(stage, []) if v in loops]
        if inner and not self.chance(0.1):
            loops = loops[: min(inner)]
        return loops

    def group_tile(self, st):
        """A grouped product's register tile (`genexpr.make_grouped`): a few rows and
        tj columns in vectors of v lanes, the group's t loop unrolled between the rows
        and the vectors, so that each row is consecutive vectorized loops
        acc[j] += x_t * b[G j + t] that `lower.passes.group.grouped_products` makes one
        instruction per 16 lanes; now and then a near miss it must leave alone
        (8 lanes, t not unrolled, t outside the rows)."""
        name, gr = st["name"], st["grouped"]
        i, j, ko, t = gr["i"], gr["j"], gr["ko"], gr["t"]
        v = self.pick((16, 16, 32, 64)) if self.chance(0.9) else 8
        width = self.spec["dims"][j]  # a number, or a size's name
        tj = v * self.pick((1, 1, 2)) if isinstance(width, str) or width >= 2 * v else v
        if not self.attempt("split", name, j, tj):
            return
        vec, cols = f"{j}_i", []
        if tj > v and self.attempt("split", name, vec, v):
            vec, cols = f"{j}_i_i", [f"{j}_i_o"]
        rows, outer = [], i
        if self.chance(0.6) and self.attempt("split", name, i, self.pick((2, 3, 4))):
            rows, outer = [f"{i}_i"], f"{i}_o"
        inner = [*rows, *cols, t] if self.chance(0.9) else [t, *rows, *cols]
        self.attempt("reorder", name, outer, f"{j}_o", ko, *inner, vec)
        for loop in inner:
            if self.chance(0.9):
                self.attempt("unroll", name, loop)
        if self.attempt("vectorize", name, vec):
            self.vectorized.setdefault(name, []).append(vec)
        if self.chance(0.4) and self.attempt("parallel", name, outer):
            self.marked.setdefault(name, []).append(outer)

    def run(self):
        self.restage()
        tiled = set()
        for st in self.spec["stages"]:
            if "grouped" in st and self.chance(0.85):
                self.group_tile(st)
                tiled.add(st["name"])
        ups = self.updates()
        for first, second in zip(ups, ups[1:]):  # consecutive updates of one stage
            if first.rsplit(".", 1)[0] == second.rsplit(".", 1)[0] and self.chance(0.4):
                self.attempt("fuse_updates", first, second)
        for u in self.updates() + self.new_updates:
            if self.chance(0.3):
                self.attempt("atomic", u)
        kept = set(self.tiles.values()) if self.chance(0.7) else set()  # mostly as tiled
        for stage in self.all_stages():
            self.loop_ops(stage, 0 if stage in kept else int(self.rng.integers(0, 5)))
        outputs = set(self.spec["outputs"])
        todo = [(c, None) for c in self.computes() if c not in outputs] + self.added
        for i in self.rng.permutation(len(todo)):
            if todo[i][0] in self.tiles and self.chance(0.8):
                continue  # mostly where register_tile put it
            self.place(*todo[i])
            if self.chance(0.3):
                self.layout(todo[i][0])
        for stage, _ in todo:
            self.loop_ops(stage, int(self.rng.integers(0, 3)))
        for stage in self.spec["outputs"]:
            self.loop_ops(stage, int(self.rng.integers(0, 2)))
            if self.chance(0.3):
                self.attempt("store_nontemporal", stage)
        if self.chance(0.05):  # refused: not an output
            self.attempt("store_nontemporal", self.pick(self.all_stages()))
        return self.s, self.ops


def generate_schedule(rng, spec, s, send=None):
    """Random primitives on schedule `s`: returns (schedule, ops as JSON-able data).
    `send` gets the ops so far before each primitive is tried."""
    return SchedGen(rng, spec, s, send).run()


def _plain(v):
    """A primitive's argument as JSON-able data: stages by name."""
    if hasattr(v, "name") and not isinstance(v, str):
        return v.name
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


def auto_schedule(rng, s, target):
    """The auto-scheduler's template for the pipeline of `s`, with every knob set at
    random (each left at its default half of the time): the space td.tune searches.
    Returns (schedule, ops as JSON-able data)."""
    t = td.autotemplate(s.outputs, target=target)
    values = {name: choices[int(rng.integers(len(choices)))]
              for name, choices in t.knobs.items() if rng.random() < 0.5}
    ops = [[m, _plain(list(args)), {k: _plain(v) for k, v in kwargs.items()}]
           for m, args, kwargs in t.bound_calls(**values)]
    return apply_ops(s, ops)[0], ops


def apply_ops(s, ops, lenient=False):
    """Replay recorded ops; `lenient` leaves out those the schedule refuses (while
    shrinking) and returns the ops kept."""
    kept = []
    for method, args, kwargs in ops:
        try:
            s = getattr(s, method)(*args, **kwargs)
        except td.ScheduleError:
            if not lenient:
                raise
            continue
        kept.append([method, args, kwargs])
    return s, kept

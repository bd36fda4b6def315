"""Traversals of the loop IR: the scoped visitor sees each name exactly where it is bound."""

from __future__ import annotations

import pytest

from tdsl import dtypes as dt
from tdsl.lower import ir
from tdsl.lower.rewrite import ScopedVisitor, free_vars

OUT = ir.Buffer("out", dt.int32, (ir.index_const(8),), "output")
TMP = ir.Buffer("tmp", dt.int32, (ir.Var("n"),), "temp")
SERIAL = ir.ForKind.SERIAL
c = ir.index_const


def _use(*names: str) -> ir.Store:
    """out[a + b + ...] = 0: a statement reading the variables `names`, in order."""
    index: ir.Expr = ir.Var(names[0])
    for n in names[1:]:
        index = ir.Binary("add", index, ir.Var(n), dt.index)
    return ir.Store(OUT, (index,), ir.Const(0, dt.int32))


class _Reads(ScopedVisitor):
    """Every variable read, with the names in scope and the buffers allocated there."""

    def __init__(self, scope=(), buffers=()):
        super().__init__(scope, buffers)
        self.reads: list[tuple[str, frozenset, frozenset]] = []

    def expr(self, e):
        if isinstance(e, ir.Var):
            self.reads.append((e.name, self.scope, self.buffers))


def _scopes(s: ir.Stmt, scope=()) -> list[tuple[str, set]]:
    v = _Reads(scope)
    v.visit(s)
    return [(name, set(sc)) for name, sc, _ in v.reads]


def test_a_let_binds_its_name_in_its_body_only():
    # let x = x: use(x); use(x) -- the value and the next statement are outside it
    s = ir.Block((ir.Let("x", ir.Var("x"), _use("x")), _use("x")))
    assert _scopes(s) == [("x", set()), ("x", {"x"}), ("x", set())]


def test_a_loop_variable_is_in_scope_inside_its_loop_only():
    # for i in i .. i: use(i); use(i) -- the bounds and the next statement are outside it
    s = ir.Block((ir.For("i", ir.Var("i"), ir.Var("i"), SERIAL, _use("i")), _use("i")))
    assert _scopes(s) == [("i", set()), ("i", set()), ("i", {"i"}), ("i", set())]


def test_nested_bindings_add_up_and_branches_see_the_same_scope():
    s = ir.For("i", c(0), c(4), SERIAL, ir.Let("j", ir.Var("i"), ir.If(
        ir.Compare("lt", ir.Var("j"), c(2)), _use("i", "j"), _use("j"))))
    assert _scopes(s, scope={"N"}) == [
        ("i", {"N", "i"}), ("j", {"N", "i", "j"}), ("i", {"N", "i", "j"}),
        ("j", {"N", "i", "j"}), ("j", {"N", "i", "j"})]


def test_an_inner_binding_shadows_an_outer_one_and_the_outer_one_returns():
    # let x = 1: (let x = x: use(x)); use(x) -- inner value reads the outer x; after the
    # inner let's body, x is still bound (by the outer let); after the outer one, not
    inner = ir.Let("x", ir.Var("x"), _use("x"))
    s = ir.Block((ir.Let("x", c(1), ir.Block((inner, _use("x")))), _use("x")))
    assert _scopes(s) == [("x", {"x"}), ("x", {"x"}), ("x", {"x"}), ("x", set())]


def test_a_loop_inside_a_let_of_its_name():
    s = ir.Let("k", c(3), ir.Block((ir.For("k", ir.Var("k"), c(8), SERIAL, _use("k")),
                                     _use("k"))))
    assert _scopes(s) == [("k", {"k"}), ("k", {"k"}), ("k", {"k"})]


def test_an_allocation_is_in_scope_in_its_body_only_and_its_shape_outside():
    load = ir.Load(TMP, (ir.Var("i"),))
    body = ir.Store(OUT, (ir.Var("i"),), load)
    s = ir.Block((ir.Let("i", c(0), ir.Allocate(TMP, body)), _use("n")))
    v = _Reads(scope={"n"})
    v.visit(s)
    assert [(name, set(b)) for name, _, b in v.reads] == [
        ("n", set()),  # the shape, outside the allocation
        ("i", {"tmp"}), ("i", {"tmp"}), ("n", set())]


def test_hooks_see_each_node_before_its_children_with_the_scope_around_it():
    seen = []

    class Order(ScopedVisitor):
        def stmt(self, s):
            seen.append((type(s).__name__, set(self.scope)))

        def expr(self, e):
            seen.append((type(e).__name__, set(self.scope)))

    Order().visit(ir.For("i", c(0), c(4), SERIAL, ir.Let("j", c(1), _use("j"))))
    assert seen == [
        ("For", set()), ("Const", set()), ("Const", set()),
        ("Let", {"i"}), ("Const", {"i"}),
        ("Store", {"i", "j"}), ("Var", {"i", "j"}), ("Const", {"i", "j"})]


def test_the_scope_is_restored_when_a_hook_raises():
    class Stop(ScopedVisitor):
        def expr(self, e):
            if isinstance(e, ir.Var):
                raise KeyError(e.name)

    v = Stop(scope={"N"})
    with pytest.raises(KeyError):
        v.visit(ir.For("i", c(0), c(4), SERIAL, ir.Allocate(TMP, _use("i"))))
    assert v.scope == {"N"} and v.buffers == frozenset()


def test_free_vars_are_the_reads_outside_every_binding():
    s = ir.Block((
        ir.Let("x", ir.Var("y"), ir.For("i", c(0), ir.Var("N"), SERIAL, _use("i", "x"))),
        ir.Let("x", ir.Var("x"), _use("x")),  # the value reads a free x
        ir.Allocate(TMP, _use("z"))))  # its shape reads n
    assert free_vars(s) == {"y", "N", "x", "z", "n"}
    assert free_vars(ir.For("i", c(0), c(4), SERIAL, _use("i"))) == set()

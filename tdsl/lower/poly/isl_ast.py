"""Names of isl's AST enums that islpy's type stubs leave out.

islpy's stub lists `ast_expr_op_type` and `ast_node_type` without their members
whose names end in an underscore, and declares `AstExpr.get_op_type`,
`AstExpr.get_type` and `AstNode.get_type` to return an int where they return the
enum. These few names give the checker the truth.
"""

from __future__ import annotations

import islpy as isl

OP_AND: isl.ast_expr_op_type = isl.ast_expr_op_type.and_  # type: ignore[attr-defined]  # stub omits and_
OP_OR: isl.ast_expr_op_type = isl.ast_expr_op_type.or_  # type: ignore[attr-defined]  # stub omits or_
NODE_FOR: isl.ast_node_type = isl.ast_node_type.for_  # type: ignore[attr-defined]  # stub omits for_
NODE_IF: isl.ast_node_type = isl.ast_node_type.if_  # type: ignore[attr-defined]  # stub omits if_


def op_type(e: isl.AstExpr) -> isl.ast_expr_op_type:
    """The operation of the operation expression `e`."""
    return e.get_op_type()  # type: ignore[return-value]  # stub says int; it is the enum


def expr_type(e: isl.AstExpr) -> isl.ast_expr_type:
    """What kind of AST expression `e` is: an operation, an identifier or an integer."""
    return e.get_type()  # type: ignore[return-value]  # stub says int; it is the enum


def node_type(n: isl.AstNode) -> isl.ast_node_type:
    """What kind of AST node `n` is: a loop, an if, a block, a mark or a statement."""
    return n.get_type()  # type: ignore[return-value]  # stub says int; it is the enum

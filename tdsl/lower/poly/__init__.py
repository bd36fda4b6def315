"""The polyhedral part of lowering (isl): the model of a scheduled pipeline, its
schedule, legality, the bounded analysis, and isl's AST checked and converted to the
loop IR."""

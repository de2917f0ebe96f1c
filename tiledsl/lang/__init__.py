"""The language: the functions a kernel body calls (`td.tile`, `td.load`, `td.atomic_add`,
`td.rand`, `td.sort`, views, fp8, the math library...). Each one records ops of the tile IR
(tiledsl/ir/ops.py) through the tracer (tiledsl/frontend/)."""

"""The frontend: how a kernel body is traced to the tile IR.

The tracer and the proxies a body computes with (values), the AST rewrite that carries Python
rebinding through loops and `if` statements (rewrite, loops, branches), argument specialization
(static_args, subclasses, param_uses, symdims, reads), block-size and knob registration
(sites, block_sizes, tunables), and the checks made while tracing (races, separation)."""

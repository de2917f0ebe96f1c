"""Lowering: passes over the tile IR and the backends that run it. Importing it registers them."""

from lowering import backends as backends
from lowering.pipeline import lower
from tiledsl.runtime import registry

registry.register_pipeline(lower)

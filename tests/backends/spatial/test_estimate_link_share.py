"""The analytic estimate prices NoC link channels that streams share, as the simulator does."""

from __future__ import annotations

import numpy as np

import tiledsl as td
from lowering.backends.spatial.arch import Arch, preset
from support import example


def test_estimate_prices_streams_sharing_a_links_channels() -> None:
    """conv2d's 18 tap streams crowd a link of generic-8x8's 8 channels: each shared transfer
    pays `link_share_cycles`, so the simulator takes longer than on links with channels to
    spare (64), and the estimate adds about as many cycles."""
    mod = example("conv2d")
    args = mod.make_inputs(np.random.default_rng(0))
    k = mod.conv2d
    config = td.Config((32, 8, 4), fold="linear", buffer_depth=4, multicast=True)
    est, sim = {}, {}
    for name, changes in {"wide": {"channels_per_link": 64}, "shared": {}}.items():
        arch = Arch.from_dict(preset("generic-8x8").to_dict() | changes | {"name": name})
        est[name] = k.config_space(*args, backend="spatial", arch=arch).estimate(config)
        sim[name] = k.simulate(*args, arch=arch, config=config).cycles
    added = sim["shared"] - sim["wide"]
    assert added > 0
    assert abs((est["shared"] - est["wide"]) - added) < 0.25 * added, (est, sim)

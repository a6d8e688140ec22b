"""protocols.dp.rng: secret noise generators (and the seeded, NOT PRIVATE, debugging path)."""

from __future__ import annotations

import torch

from protocols.dp.rng import make_torch_generator


def test_secret_torch_generators_use_their_whole_state() -> None:
    """torch's manual_seed keeps 32 bits of a seed; a secret generator's 624 MT19937 words
    come from secrets, so no 32-bit seed reproduces its stream."""
    g = make_torch_generator()
    words = g.get_state().numpy()[24 : 24 + 8 * 624].view("<u8")
    s0 = int(words[0])
    # init_genrand(seed) starts its 624 words with seed mod 2^32: s0 is the only candidate
    replay = torch.Generator().manual_seed(s0)
    assert not torch.equal(torch.rand(64, generator=g), torch.rand(64, generator=replay))
    assert len(set(words.tolist())) > 600 and int(words.max()) < 2**32
    a, b = make_torch_generator(), make_torch_generator()
    assert not torch.equal(torch.rand(8, generator=a), torch.rand(8, generator=b))
    seeded = [torch.rand(8, generator=make_torch_generator(5, "k")) for _ in range(2)]
    torch.testing.assert_close(*seeded)


"""Go's liberty planes (Config.liberty_planes; envs/go_liberties.py): liberties counted by hand on hand-made boards,
against a flood fill on positions of random play, a chain that winds over the whole board, and the switch in the
network (its stem's input planes), the FLOP count and the validation."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from az_jax.core import config as config_lib
from az_jax.core import flops, networks
from az_jax.core import presets as presets_lib
from envs import go_liberties

pytestmark = pytest.mark.usefixtures("fast_compiles")  # tiny programs: XLA's optimisation passes off (conftest.py)


def board(rows: list[str]) -> np.ndarray:
    """'x' the mover's stone, 'o' the opponent's, '.' empty -> colour [n, n] (1, 2, 0)."""
    return np.array([[{".": 0, "x": 1, "o": 2}[ch] for ch in row] for row in rows], np.int32)


def observation(colour: np.ndarray) -> jnp.ndarray:
    """colour [n, n] -> one pgx-like observation [1, n, n, 3]: mover's stones, opponent's, a colour plane of ones
    (which the planes must ignore)."""
    return jnp.asarray(np.stack([colour == 1, colour == 2, np.ones_like(colour, bool)], axis=-1)[None])


def flood_fill_liberties(colour: np.ndarray) -> np.ndarray:
    """The liberties of each stone's chain by depth-first search (0 on empty points): the reference."""
    n = colour.shape[0]
    out = np.zeros_like(colour)
    for r in range(n):
        for c in range(n):
            if colour[r, c] == 0:
                continue
            seen, stack, libs = {(r, c)}, [(r, c)], set()
            while stack:
                a, b = stack.pop()
                for x, y in ((a + 1, b), (a - 1, b), (a, b + 1), (a, b - 1)):
                    if 0 <= x < n and 0 <= y < n:
                        if colour[x, y] == 0:
                            libs.add((x, y))
                        elif colour[x, y] == colour[r, c] and (x, y) not in seen:
                            seen.add((x, y))
                            stack.append((x, y))
            out[r, c] = len(libs)
    return out


# 5×5 by hand (row 0 at the top):
#   x x . . .     the mover's corner pair (0,0)-(0,1): liberties (1,1), (0,2) = 2 ((1,0) is the opponent's)
#   o . . o .     the opponent's (1,0): liberties (1,1), (2,0) = 2 ((0,0) is the mover's)
#   . . o x o     the opponent's (1,3): (0,3), (1,2), (1,4) = 3 ((2,3) is the mover's)
#   o . . o .     the opponent's (2,2): (1,2), (2,1), (3,2) = 3;  the mover's (2,3): its neighbours (1,3), (3,3),
#   x . . . .     (2,2), (2,4) are all the opponent's: 0 liberties (no legal position keeps it; the count still says
#                 0, and no plane marks it);  the opponent's (2,4): (1,4), (3,4) = 2;  the opponent's (3,3): (3,2),
#                 (3,4), (4,3) = 3;  the opponent's (3,0): (2,0), (3,1) = 2;  the mover's (4,0): (4,1) = 1 (atari)
HAND = [
    "xx...",
    "o..o.",
    "..oxo",
    "o..o.",
    "x....",
]
HAND_LIBERTIES = np.array(
    [
        [2, 2, 0, 0, 0],
        [2, 0, 0, 3, 0],
        [0, 0, 3, 0, 2],
        [2, 0, 0, 3, 0],
        [1, 0, 0, 0, 0],
    ]
)


def test_liberties_by_hand():
    colour = board(HAND)
    counted = np.asarray(go_liberties.liberties(jnp.asarray(colour)[None]))[0]
    np.testing.assert_array_equal(counted, HAND_LIBERTIES)
    np.testing.assert_array_equal(flood_fill_liberties(colour), HAND_LIBERTIES)  # the reference agrees by hand


def test_planes_mark_chains_with_one_two_three_liberties():
    planes = np.asarray(go_liberties.liberty_planes(observation(board(HAND))))[0]  # [5, 5, 3]
    assert planes.shape == (5, 5, 3) and planes.dtype == np.float32
    # 1 liberty: the mover's (4,0); 2: the mover's pair and the opponent's (1,0), (2,4), (3,0); 3: the opponent's
    # (1,3), (2,2), (3,3)
    assert {tuple(p) for p in np.argwhere(planes[..., 0])} == {(4, 0)}
    assert {tuple(p) for p in np.argwhere(planes[..., 1])} == {(0, 0), (0, 1), (1, 0), (2, 4), (3, 0)}
    assert {tuple(p) for p in np.argwhere(planes[..., 2])} == {(1, 3), (2, 2), (3, 3)}


def test_chain_winding_over_the_whole_board_is_one_chain():
    # A serpentine of the mover's stones over rows 0, 2, 4, 6, 8 of a 9×9 board, joined at alternate ends (rows 1, 3,
    # 5, 7 hold one stone each): one chain of 5·9 + 4 = 49 stones whose smallest-index stone (0, 0) is 48 steps along
    # it from the far end. Its liberties: every empty point (81 − 49 = 32) touches it.
    rows = []
    for r in range(9):
        if r % 2 == 0:
            rows.append("x" * 9)
        else:
            rows.append("........x" if r % 4 == 1 else "x........")
    colour = jnp.asarray(board(rows))[None]
    labels = np.asarray(go_liberties.chain_labels(colour))[0]
    assert set(labels[np.asarray(colour[0]) == 1].tolist()) == {0}
    assert (labels[np.asarray(colour[0]) == 0] == 81).all()
    counted = np.asarray(go_liberties.liberties(colour))[0]
    assert (counted[np.asarray(colour[0]) == 1] == 32).all()


def test_liberties_equal_the_flood_fill_on_random_play():
    env = envs.make_env("go_9x9")[0]
    batch = 16
    state = jax.vmap(env.init)(jax.random.split(jax.random.key(0), batch))
    step = jax.jit(jax.vmap(env.step))
    count = jax.jit(lambda obs: go_liberties.liberties(jnp.where(obs[..., 0], 1, jnp.where(obs[..., 1], 2, 0))))
    key = jax.random.key(1)
    checked = 0
    for ply in range(90):
        key, sub = jax.random.split(key)
        logits = jnp.where(state.legal_action_mask, 0.0, -1e9).at[:, -1].add(-5.0)  # passes rare
        state = step(state, jax.random.categorical(sub, logits))
        if ply % 30 == 29:
            obs, counted = np.asarray(state.observation), np.asarray(count(state.observation))
            for b in range(batch):
                colour = np.where(obs[b, ..., 0], 1, np.where(obs[b, ..., 1], 2, 0))
                np.testing.assert_array_equal(counted[b], flood_fill_liberties(colour))
                checked += 1
    assert checked == 48


def _go_config(**changes) -> config_lib.Config:
    base = presets_lib.preset("go_9x9", "small")
    return dataclasses.replace(base, num_blocks=1, num_channels=4, value_hidden=8, **changes)


def test_network_stem_takes_three_more_planes():
    obs = jnp.zeros((2, 9, 9, 17), jnp.float32)
    kernels = {}
    for on in (False, True):
        net = networks.make_network(_go_config(liberty_planes=on), 82)
        variables = jax.jit(lambda key, net=net: net.init(key, obs))(jax.random.key(0))
        kernels[on] = variables["params"]["Conv_0"]["kernel"].shape
    assert kernels == {False: (3, 3, 17, 4), True: (3, 3, 20, 4)}


def test_flops_count_the_liberty_planes():
    # the stem reads 17 + 3 planes: 2·81·9·3·4 = 17,496 more FLOPs
    base = flops.network_forward_flops(_go_config(), (9, 9, 17), 82)
    assert flops.network_forward_flops(_go_config(liberty_planes=True), (9, 9, 17), 82) == base + 17_496


def test_liberty_planes_are_for_go_only():
    config = dataclasses.replace(presets_lib.preset("connect_four", "small"), liberty_planes=True)
    with pytest.raises(config_lib.ConfigError, match="liberty_planes is for Go"):
        config.validate()

"""Board symmetries (envs/symmetries.py) against the real pgx rules, and their use in learning and search.

The central check cannot build a transformed pgx state directly, so it tests the observable equivalent: play random
legal moves from pgx's start position, and beside each game replay the same moves mapped through every declared
symmetry g from the same start (valid because the declared g fix each game's start position). At every ply the
replayed position's observation, legal mask, player to move, rewards and termination must be the transformed ones of
the original; at the last position, stepping each legal action a in the original and g(a) in the replay must again
give transformed observations. Each game's stepping is one jitted function called with one batch shape (compiled
once per game).

Conventions (envs/symmetries.py): row 0 is the top row; action r·W + c is cell (r, c); "rot90" is np.rot90
(counter-clockwise as printed), so cell (r, c) of a W×W board goes to (W − 1 − c, r).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pgx
import pytest

from az_jax.core import config as config_lib
from az_jax.core import overrides as overrides_lib
from az_jax.core import presets as presets_lib
from az_jax.core import replay, search
from envs import GAMES
from envs import symmetries as sym

# Programs that compile for far longer than they run: XLA's optimisation passes off (conftest.py).
pytestmark = pytest.mark.usefixtures("fast_compiles")

SYMMETRIC_GAMES = [name for name, spec in GAMES.items() if spec.symmetries]
# Plies of random play per game. Hex plays to the end (at most 121 plies): before a win its observation is only
# stones, so a transform that broke adjacency or swapped the goals would show only in when and whom the game ends.
PLIES = {"tic_tac_toe": 9, "connect_four": 24, "othello": 24, "hex": 121, "go_9x9": 24}
# go_19x19 is pgx's same Go code (Go(size=19)) with tables from the same code as go_9x9 (only N differs); its tables are
# checked below, but replaying it costs ~15 s of compilation for the one pgx step function, so the rules check plays
# 9×9 only.
NUM_GAMES = 2  # random games per game type (seeds); each replayed under every symmetry


def test_declared_symmetries():
    d8 = ("identity", "rot90", "rot180", "rot270", "flip_lr", "flip_ud", "transpose", "antitranspose")
    assert {n: GAMES[n].symmetries for n in SYMMETRIC_GAMES} == {
        "tic_tac_toe": d8,
        "connect_four": ("identity", "flip_lr"),
        "othello": ("identity", "rot180", "transpose", "antitranspose"),
        "hex": ("identity", "rot180"),
        "go_9x9": d8,
        "go_19x19": d8,
    }
    for name in ["chess", "shogi", "gardner_chess", "animal_shogi"]:
        assert GAMES[name].symmetries == () and sym.num_symmetries(name) == 1


@pytest.mark.parametrize("game", SYMMETRIC_GAMES)
def test_tables_are_distinct_permutations_matching_pgx(game):
    env = pgx.make(game)
    board, t = sym.BOARDS[game], sym.tables(game)
    observation = jax.eval_shape(env.init, jax.random.key(0)).observation  # traced, not run
    assert observation.shape[:2] == (board.height, board.width) and env.num_actions == board.num_actions
    assert sym.num_symmetries(game) == len(GAMES[game].symmetries) == len(t.names)
    for k in range(len(t.names)):
        np.testing.assert_array_equal(np.sort(t.cell_source[k]), np.arange(board.height * board.width))
        np.testing.assert_array_equal(np.sort(t.action_source[k]), np.arange(board.num_actions))
        np.testing.assert_array_equal(t.action_source[k][t.action_image[k]], np.arange(board.num_actions))
    # A quarter turn or a diagonal reflection of a non-square board is refused.
    with pytest.raises(ValueError, match="does not map a 6×7 board onto itself"):
        sym._permutation_of("rot90", 6, 7)
    # No two names give the same transform (the identity is row 0).
    assert len({row.tobytes() for row in t.cell_source}) == len(t.names)
    np.testing.assert_array_equal(t.cell_source[0], np.arange(board.height * board.width))


def test_hand_checked_images():
    # Connect four, flip_lr: column c -> 6 − c, so 0 <-> 6, 1 <-> 5, 2 <-> 4 and 3 stays.
    flip = sym.tables("connect_four").names.index("flip_lr")
    got = sym.transform_action("connect_four", flip, jnp.arange(7))
    np.testing.assert_array_equal(got, [6, 5, 4, 3, 2, 1, 0])
    # Go 9×9, rot90 = np.rot90: new[i, j] = old[j, 8 − i], so old (r, c) lands at i = 8 − c, j = r.
    # GTP C9 is row 0 (top), column 2: action 0·9 + 2 = 2 -> (8 − 2, 0) = (6, 0) = action 6·9 + 0 = 54, GTP A3
    # (row 6 is 9 − 6 = 3 in GTP): a quarter turn counter-clockwise takes the top edge to the left edge.
    # Pass (81) maps to itself. E5, the centre (4, 4) = 40, is fixed by every symmetry.
    rot90 = sym.tables("go_9x9").names.index("rot90")
    np.testing.assert_array_equal(sym.transform_action("go_9x9", rot90, jnp.array([2, 81, 40])), [54, 81, 40])
    # The same on observations: a stone at C9 seen under rot90 is at A3.
    obs = jnp.zeros((1, 9, 9, 17), jnp.bool_).at[0, 0, 2, 0].set(True)
    moved = np.asarray(sym.transform_observation("go_9x9", rot90, obs))
    assert moved[0, 6, 0, 0] and moved.sum() == 1
    # And on policies: p'[g(a)] = p[a], so the mass on C9 moves to A3; inverse_policy moves it back.
    policy = jnp.zeros((1, 82)).at[0, 2].set(1.0)
    assert float(sym.transform_policy("go_9x9", rot90, policy)[0, 54]) == 1.0
    np.testing.assert_array_equal(
        sym.inverse_policy("go_9x9", rot90, sym.transform_policy("go_9x9", rot90, policy)), policy
    )


@pytest.mark.parametrize("game", ["tic_tac_toe", "connect_four", "othello", "hex", "go_9x9"])
def test_transforms_and_inverses_compose_to_identity(game):
    board = sym.BOARDS[game]
    rng = np.random.default_rng(0)
    n, k = 16, sym.num_symmetries(game)
    obs = jnp.asarray(rng.random((n, board.height, board.width, 3)) < 0.5)
    policy = jnp.asarray(rng.random((n, board.num_actions)), jnp.float32)
    index = jnp.asarray(rng.integers(0, k, n))  # each sample its own symmetry
    np.testing.assert_array_equal(
        sym.inverse_observation(game, index, sym.transform_observation(game, index, obs)), obs
    )
    np.testing.assert_array_equal(sym.inverse_policy(game, index, sym.transform_policy(game, index, policy)), policy)
    np.testing.assert_array_equal(sym.transform_policy(game, index, sym.inverse_policy(game, index, policy)), policy)
    # A per-sample index does to each sample what that sample's symmetry does alone.
    for b in range(3):
        np.testing.assert_array_equal(
            sym.transform_observation(game, index, obs)[b],
            sym.transform_observation(game, int(index[b]), obs[b : b + 1])[0],
        )


def _play_and_replay(game: str, seed: int):
    """Random games and their replays under every symmetry, all in one batch [K·G] (row k·G + g: symmetry k of game g).

    Returns per-ply arrays [T + 1, K·G, ...] (observation, legal, player, rewards, terminated), the last states, the
    symmetry of each row [K·G] and the step function."""
    env = pgx.make(game)
    k, g = sym.num_symmetries(game), NUM_GAMES
    rows_sym = np.repeat(np.arange(k), g)  # [K·G]
    image = sym.tables(game).action_image  # [K, A]
    step = jax.jit(jax.vmap(env.step))
    # The same init key for every copy of a game: pgx picks the first player's id from it.
    states = jax.vmap(env.init)(jnp.tile(jax.random.split(jax.random.key(seed), g), k))
    rng = np.random.default_rng(seed)
    record = lambda s: jax.tree.map(
        np.asarray, (s.observation, s.legal_action_mask, s.current_player, s.rewards, s.terminated)
    )
    trace = [record(states)]
    for _ in range(PLIES[game]):
        legal = trace[-1][1][:g]  # the originals: rows k = 0
        action = np.array([rng.choice(np.flatnonzero(m)) for m in legal])  # [G]
        states = step(states, jnp.asarray(image[rows_sym, np.tile(action, k)]))  # g(a) in each replay
        trace.append(record(states))
    return [np.stack(x) for x in zip(*trace)], states, rows_sym, step


def _originals(x, rows_sym):
    """x [T, K·G, ...] -> each row's original game (row g of symmetry 0), [T, K·G, ...]."""
    return x[:, np.tile(np.arange(NUM_GAMES), len(rows_sym) // NUM_GAMES)]


@pytest.mark.parametrize("game", list(PLIES))
def test_rules_commute_with_the_declared_symmetries(game):
    (obs, legal, player, rewards, terminated), last, rows_sym, step = _play_and_replay(game, seed=3)
    plies, rows = obs.shape[:2]
    index = jnp.asarray(np.tile(rows_sym, plies))  # [(T+1)·K·G]
    original_obs = _originals(obs, rows_sym).reshape((-1,) + obs.shape[2:])
    original_legal = _originals(legal, rows_sym).reshape(plies * rows, -1)
    np.testing.assert_array_equal(sym.transform_observation(game, index, original_obs).reshape(obs.shape), obs)
    np.testing.assert_array_equal(sym.transform_policy(game, index, original_legal).reshape(legal.shape), legal)
    for same in (player, rewards, terminated):  # who moves, the outcome and the end do not see the board's orientation
        np.testing.assert_array_equal(_originals(same, rows_sym), same)
    assert legal[:, :NUM_GAMES].sum() > plies * NUM_GAMES  # the games had choices (not only forced passes)
    if game == "hex":  # hex has no draws: 121 plies end every game, so the wins above were compared
        assert terminated[-1].all()

    # Every action from the last positions: a in the original, g(a) in each replay (illegal ones are not compared).
    image = sym.tables(game).action_image
    originals = np.tile(np.arange(NUM_GAMES), len(rows_sym) // NUM_GAMES)
    after, after_legal, ok = [], [], []
    for a in range(image.shape[1]):
        moved = step(last, jnp.asarray(image[rows_sym, a]))
        after.append(np.asarray(moved.observation))
        after_legal.append(np.asarray(moved.legal_action_mask))
        ok.append(np.asarray(last.legal_action_mask)[originals, a])
    after, after_legal, ok = np.stack(after), np.stack(after_legal), np.stack(ok)  # [A, K·G, ...]
    index = jnp.asarray(np.tile(rows_sym, len(after)))
    want = sym.transform_observation(game, index, _originals(after, rows_sym).reshape((-1,) + after.shape[2:]))
    want_legal = sym.transform_policy(game, index, _originals(after_legal, rows_sym).reshape(-1, after_legal.shape[-1]))
    np.testing.assert_array_equal(np.asarray(want).reshape(after.shape)[ok], after[ok])
    np.testing.assert_array_equal(np.asarray(want_legal).reshape(after_legal.shape)[ok], after_legal[ok])
    assert ok.sum() >= len(rows_sym)  # at least one legal action per position was compared


def test_othello_start_rules_out_the_other_symmetries():
    # pgx's start: cells 27 (3,3) and 36 (4,4) one colour, 28 (3,4) and 35 (4,3) the other. rot90 takes (3,3) to
    # (7 − 3, 3) = (4,3): a cell of the other colour, so the quarter turns and the two mirrors change the start.
    start = np.asarray(pgx.make("othello").init(jax.random.key(0)).observation).reshape(64, 2)
    for name in sym.OPERATIONS:
        image = start[sym._permutation_of(name, 8, 8)]
        assert np.array_equal(image, start) == (name in GAMES["othello"].symmetries), name


def test_hex_reflections_are_not_symmetries():
    """The diagonal reflections swap the players' goals and the mirrors break adjacency: hand-built wins show it.

    In pgx's hex the first player (colour 0) joins rows 0 and 10, the second player columns 0 and 10, and cell (r, c)
    neighbours (r, c ± 1), (r ± 1, c), (r + 1, c − 1), (r − 1, c + 1)."""
    env = pgx.make("hex")
    step = jax.jit(env.step)

    def play(first, second, name="identity"):
        """First and second player alternate placing stones on the g-images of the given cells."""
        g = np.argsort(sym._permutation_of(name, 11, 11))  # g[a]: image of cell a
        state = env.init(jax.random.key(0))
        for a, b in zip(first, second + [None]):
            state = step(state, jnp.int32(g[a]))
            if b is not None:
                state = step(state, jnp.int32(g[b]))
        return state

    # The first player fills column 0 (r, 0), a chain through the (r ± 1, c) neighbours joining rows 0 and 10; the
    # second player fills (5, 1) .. (5, 10), which does not reach column 0. The 11th first-player stone (ply 21) wins.
    column, row = [r * 11 for r in range(11)], [5 * 11 + c for c in range(1, 11)]
    won = play(column, row)
    assert bool(won.terminated) and float(won.rewards[won.current_player]) == -1.0  # the player to move lost
    # rot180 (declared): (r, 0) -> (10 − r, 10), still a column joining rows 0 and 10: still a win.
    assert bool(play(column, row, "rot180").terminated)
    # transpose: the first player's stones lie on row 0, joining columns 0 and 10, the second player's edges: no win.
    assert not bool(play(column, row, "transpose").terminated)
    # The anti-diagonal (r, 10 − r) is a chain through the (r + 1, c − 1) neighbours and wins (the second player fills
    # (0, 0) .. (9, 0), touching only column 0); its flip_lr image, the diagonal (r, r), steps by (+1, +1), which is
    # not a neighbour: no chain, no win.
    anti, left = [r * 11 + 10 - r for r in range(11)], [r * 11 for r in range(10)]
    assert bool(play(anti, left).terminated)
    assert not bool(play(anti, left, "flip_lr").terminated)


def test_sampling_with_augmentation_returns_symmetric_images_of_stored_positions():
    game, n_rows = "tic_tac_toe", 8
    rng = np.random.default_rng(1)
    buffer = replay.init(n_rows, (3, 3, 2), jnp.bool_, 9)
    obs = rng.random((n_rows, 3, 3, 2)) < 0.5
    policy = rng.random((n_rows, 9)).astype(np.float32)
    legal = rng.random((n_rows, 9)) < 0.7
    outcome = rng.choice([-1.0, 0.0, 1.0], n_rows).astype(np.float32)
    buffer = buffer.replace(
        observation=jnp.asarray(obs),
        policy=jnp.asarray(policy),
        legal=jnp.asarray(legal),
        outcome=jnp.asarray(outcome),
        done=jnp.ones(n_rows, jnp.bool_),
    )
    batch = jax.jit(replay.sample, static_argnums=(2, 3))(buffer, jax.random.key(0), 64, game)
    t = sym.tables(game)
    used = set()
    for i in range(64):
        o = np.asarray(batch.observation[i]).reshape(9, 2)
        # The stored row and symmetry it came from: transformed row obs[r][cell_source[k]] equals the sample, and so
        # do its policy and legal mask under the same cell permutation (tic-tac-toe's actions are its cells).
        found = [
            (r, k)
            for r in range(n_rows)
            for k in range(len(t.names))
            if np.array_equal(obs[r].reshape(9, 2)[t.cell_source[k]], o)
            and np.array_equal(policy[r][t.cell_source[k]], batch.policy[i])
            and np.array_equal(legal[r][t.cell_source[k]], batch.legal[i])
            and outcome[r] == batch.outcome[i]
        ]
        assert found, f"sample {i} is no symmetric image of a stored position"
        used.update(k for _, k in found)
    # 64 uniform draws over 8 symmetries: all 8 appear except with probability < 8·(7/8)^64 ≈ 1.6e-3; ask for 6.
    assert len(used) >= 6
    # Without augmentation every sample is a stored row as it was stored.
    plain = replay.sample(buffer, jax.random.key(0), 64)
    assert all(any(np.array_equal(obs[r], plain.observation[i]) for r in range(n_rows)) for i in range(64))


def test_augmentation_switches_need_a_game_with_symmetries():
    base = presets_lib.preset("chess", "small")
    assert not base.augment_symmetries and not base.search_symmetries  # off by default
    for key in ["augment_symmetries", "search_symmetries"]:
        with pytest.raises(config_lib.ConfigError, match=f"{key} needs a game with board symmetries"):
            overrides_lib.override(base, [f"{key}=true"]).validate()
        overrides_lib.override(presets_lib.preset("go_9x9", "small"), [f"{key}=true"]).validate()


def test_search_evaluates_every_position_under_a_random_symmetry():
    """A 'network' whose logits are 0..8 whatever it sees: mapped back through g⁻¹ they read g(a) per action, which
    names the symmetry each evaluation used (root and interior nodes alike)."""
    env = pgx.make("tic_tac_toe")
    batch, sims = 32, 6
    states = jax.vmap(env.init)(jax.random.split(jax.random.key(0), batch))

    def apply_fn(variables, observation):
        n = observation.shape[0]
        return jnp.broadcast_to(jnp.arange(9, dtype=jnp.float32), (n, 9)), jnp.zeros(n)

    @functools.partial(jax.jit, static_argnums=0)
    def priors(symmetry_game):
        settings = search.SearchConfig(num_simulations=sims, dirichlet_fraction=0.0, symmetry_game=symmetry_game)
        tree = search.run_search(apply_fn, env, {}, jax.random.key(1), states, settings).search_tree
        return tree.children_prior_logits, tree.embeddings.legal_action_mask  # [B, nodes, A] each

    def run(symmetry_game):
        return jax.tree.map(np.asarray, priors(symmetry_game))

    image = sym.tables("tic_tac_toe").action_image  # [8, 9] g_k(a)

    def symmetries_used(prior, legal):
        """[B, nodes] set of k consistent with each node's prior (legal entries, up to a constant shift)."""
        out = []
        for b in range(prior.shape[0]):
            for node in range(sims + 1):
                m = legal[b, node]
                p = prior[b, node][m] - prior[b, node][m].max()
                out.append({k for k in range(8) if np.allclose(p, image[k][m] - image[k][m].max(), atol=1e-4)})
        return np.array(out, dtype=object).reshape(prior.shape[0], sims + 1)

    used = symmetries_used(*run("tic_tac_toe"))
    assert all(len(s) >= 1 for s in used.ravel())  # every evaluation is some symmetry's image
    # The root has all 9 actions legal, so its symmetry is identified exactly; over 32 roots (8 symmetries) at
    # least 6 distinct appear except with negligible probability; interior nodes too are not all the identity.
    roots = [next(iter(s)) for s in used[:, 0]]
    assert all(len(s) == 1 for s in used[:, 0]) and len(set(roots)) >= 6
    assert sum(0 not in s for s in used[:, 1:].ravel()) > batch


@pytest.mark.parametrize("game", ["go_9x9", "connect_four", "othello"])
def test_symmetric_evaluation_of_an_equivariant_network_changes_nothing(game):
    """A cell-wise 'network' (logit of a cell = a weighted sum of that cell's channels) commutes with every symmetry,
    so evaluating it under random symmetries and mapping the logits back must give exactly the plain logits. A
    transform applied in the wrong direction (g instead of g⁻¹ on the way back) would move them."""
    board = sym.BOARDS[game]
    rng = np.random.default_rng(2)
    obs = jnp.asarray(rng.random((64, board.height, board.width, 3)) < 0.5)

    def apply_fn(variables, observation):
        cells = (observation * jnp.float32([1.0, 2.0, 4.0])).sum(-1)  # [B, H, W]
        if board.actions == "columns":
            logits = cells.sum(1)  # [B, W] per column
        else:
            extra = jnp.full((cells.shape[0], board.num_actions - board.height * board.width), -1.0)
            logits = jnp.concatenate([cells.reshape(cells.shape[0], -1), extra], axis=1)  # [B, A]
        return logits, cells.sum((1, 2))

    plain = apply_fn({}, obs)
    logits, value = search.predict(apply_fn, {}, obs, jax.random.key(3), symmetry_game=game)
    np.testing.assert_array_equal(logits, plain[0])
    np.testing.assert_array_equal(value, plain[1])
    # The observations the network saw were not all the untransformed ones.
    seen = []
    search.predict(lambda v, o: (seen.append(o), plain)[1], {}, obs, jax.random.key(3), symmetry_game=game)
    assert not np.array_equal(seen[0], obs)

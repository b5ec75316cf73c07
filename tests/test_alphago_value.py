"""AlphaGo's value network stage (az_jax/alphago/value_data.py, value_training.py): one position per self-play game
(U, p_σ before it, one uniformly random legal move, p_ρ after it), the resumable data set, MSE training, Fig. 2b's
evaluators.

The stub policies are tiny networks whose weights are all zero except the per-point bias: p_σ puts +50 on the 9
points of the top row, p_ρ on the 9 of the bottom row, so p_σ plays the top row while it has a sensible point and
p_ρ the bottom row (a point off the favoured row has probability below 81 · e^−50 ≈ 2e−20), and every move shows
which network chose it."""

import json
import types

import jax
import jax.numpy as jnp
import numpy as np
import pgx
import pytest
from jax.sharding import PartitionSpec as P

from az_jax.alphago import supervised, value_data, value_store, value_training
from az_jax.alphago.dataset import Positions
from az_jax.alphago.networks import PolicyNetwork
from az_jax.alphago.position import Position, from_pgx
from az_jax.core import devices
from az_jax.runtime import columns

N = 9
GAMES = 64  # every generate call plays 64 games (32 per test device): one compiled program for the whole file
SL_CONFIG = supervised.SLConfig(size=N, filters=2, layers=2, planes=4)
RL_CONFIG = types.SimpleNamespace(layers=2, filters=2, planes=4)  # any config with the network's shape will do


def _row_policy(row: int) -> dict:
    shapes = jax.eval_shape(PolicyNetwork(layers=2, filters=2).init, jax.random.key(0), jnp.zeros((1, N, N, 4)))
    params = jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), shapes["params"])
    params["PointBias_0"]["bias"][row * N : (row + 1) * N] = 50.0
    return params


SL = (SL_CONFIG, _row_policy(0))
RL = (RL_CONFIG, _row_policy(N - 1))


@pytest.fixture(scope="module")
def games():
    """64 games with U ~ unif{1, 9}: the top row never fills before U (at most 8 stones of p_σ there)."""
    g = jax.device_get(value_data.generate(SL, RL, GAMES, jax.random.key(3), N, u_range=(1, 9)))
    return jax.tree.map(np.asarray, g)


@pytest.fixture(scope="module")
def replayed(games):
    """pgx env states after the U moves (s_{U+1}), after U − 1 (s_U) and after the whole game."""
    moves = games.moves.astype(np.int32)
    u = games.u[:, None]
    columns = np.arange(moves.shape[1])
    prefix = lambda k: np.where(columns < k, moves, -1)  # noqa: E731
    return tuple(jax.device_get(value_data.replay_states(m, N)) for m in (prefix(u), prefix(u - 1), moves))


def test_one_position_per_game_with_u_in_range(games):
    assert games.valid.all() and (games.attempts == 1).all()  # 9 moves never end a game: no redraw
    assert games.outcome.shape == (GAMES,) and games.position.board.shape == (GAMES, N * N)
    assert games.u.min() >= 1 and games.u.max() <= 9
    # 64 draws of unif{1, 9}: P(some value never drawn) <= 9 · (8/9)^64 ≈ 0.005; 7 or more distinct values are
    # certain for any practical purpose.
    assert len(set(games.u.tolist())) >= 7


def test_the_position_is_the_one_after_exactly_u_moves(games, replayed):
    after_u, _, _ = replayed
    stored, again = games.position, from_pgx(after_u)
    for name in ("board", "turns_since", "ko", "black_to_move"):
        np.testing.assert_array_equal(getattr(stored, name), np.asarray(getattr(again, name)), err_msg=name)
    # By hand: U moves were played, so Black is to move at s_{U+1} exactly when U is even, and the random move a_U
    # is the last stone: the opponent's (−1), played 1 turn ago.
    np.testing.assert_array_equal(stored.black_to_move, games.u % 2 == 0)
    last = games.moves[np.arange(GAMES), games.u - 1]
    assert (stored.board[np.arange(GAMES), last] == -1).all() and (
        stored.turns_since[np.arange(GAMES), last] == 1
    ).all()
    # Nothing can be captured before a_U (p_σ's stones all lie on the top row, each with its liberty below), and a_U
    # captures at most one of them; so U − 1 <= stones <= U.
    stones = (stored.board != 0).sum(axis=1)
    assert ((stones == games.u) | (stones == games.u - 1)).all()


def test_phases_sigma_then_one_random_move_then_rho(games):
    rows = games.moves // N
    for i in range(GAMES):
        u = games.u[i]
        assert (rows[i, : u - 1] == 0).all(), (i, u, games.moves[i, :u])  # moves 1 … U−1: p_σ (top row)
        assert rows[i, u] == N - 1, (i, u, games.moves[i, : u + 1])  # move U+1: p_ρ (bottom row, at most 1 stone)
    # a_U is not p_σ's or p_ρ's choice: of 64 uniform random points, the chance that all lie on the top or bottom row
    # is (18/81)^64 ≈ 1e−42; about 64 · 63/81 ≈ 50 lie elsewhere.
    random_rows = rows[np.arange(GAMES), games.u - 1]
    assert ((random_rows != 0) & (random_rows != N - 1)).sum() >= 30


def test_moves_are_legal_and_z_is_for_the_player_to_move_at_s_u_plus_1(games, replayed):
    after_u, before_u, final = replayed
    played = (games.moves >= 0).sum(axis=1)
    # replay_states refuses a move pgx's mask forbids or one after the game's end (so every recorded move was
    # legal); the game ended at its last move and went on after s_{U+1}.
    np.testing.assert_array_equal(final._step_count, played)
    assert final.terminated.all() and (played > games.u).all()
    random_move = games.moves[np.arange(GAMES), games.u - 1]
    assert before_u.legal_action_mask[np.arange(GAMES), random_move].all()
    assert (random_move < N * N).all()  # a point: every s_U here has legal points
    z = final.rewards[np.arange(GAMES), after_u.current_player]  # pgx's result for the player to move at s_{U+1}
    np.testing.assert_array_equal(games.outcome, z.astype(np.int8))
    assert set(games.outcome.tolist()) == {-1, 1}  # area scoring with komi 7.5: no draw; both results occur


def test_weights_on_different_devices_give_the_same_games(games):
    """p_σ as restored by one process (committed to its first device) and p_ρ replicated on the mesh (as RL training
    leaves it): generate places both on its mesh, and the games are the fixture's (same key, same weights)."""
    mesh = devices.make_mesh()
    sl_one_device = jax.device_put(SL[1], jax.devices()[0])
    rl_on_mesh = jax.device_put(RL[1], devices.shardings(mesh, P()))
    g = value_data.generate(
        (SL_CONFIG, sl_one_device), (RL_CONFIG, rl_on_mesh), GAMES, jax.random.key(3), N, u_range=(1, 9)
    )
    for got, want in zip(jax.tree.leaves(jax.device_get(g)), jax.tree.leaves(games), strict=True):
        np.testing.assert_array_equal(np.asarray(got), want)


def test_the_random_move_is_uniform_over_the_legal_points():
    # U = 1 on the empty 9x9 board: all 81 points are legal. 4 batches of 64 games, 256 first moves, E = 256 / 81 ≈
    # 3.16 per point. Pearson's X² over the 81 points has 80 degrees of freedom under uniformity: mean 80, standard
    # deviation sqrt(2 · 80) ≈ 12.6, P(X² > 135.8) = P(X² < 41.2) = 1e−4 (chi2.ppf(0.9999, 80) = 135.78,
    # chi2.ppf(0.0001, 80) = 41.24). Were a_1 p_σ's (top row only), X² ≈ 9 · (28.4 − 3.16)² / 3.16 + 72 · 3.16 ≈ 2040;
    # were it spread evenly by game index (game % 81: 13 points 4 times, 68 points 3 times),
    # X² = (13 · 0.84² + 68 · 0.16²) / 3.16 ≈ 3.5, far below 41.2.
    firsts = []
    for b in range(4):
        g = value_data.generate(SL, RL, GAMES, jax.random.key(11), N, u_range=(1, 1), first_game=b * GAMES)
        moves = np.asarray(g.moves)
        assert (np.asarray(g.u) == 1).all()
        firsts.append(moves[:, 0])
    first = np.concatenate(firsts)
    assert (first >= 0).all() and (first < N * N).all()
    counts = np.bincount(first, minlength=N * N)
    expected = len(first) / (N * N)
    x2 = float(((counts - expected) ** 2 / expected).sum())
    assert 41.2 < x2 < 135.8, (x2, counts)


def test_a_game_that_ends_before_u_is_redrawn_then_given_up():
    # pgx ends every 9x9 game by its 162nd move (2 · 81), and these games end long before (85 to 160 moves in
    # practice): U = 161 is never reached, so every slot starts max_attempts = 2 games and then gives up.
    g = jax.device_get(value_data.generate(SL, RL, GAMES, jax.random.key(5), N, u_range=(161, 161), max_attempts=2))
    assert not np.asarray(g.valid).any()
    assert (np.asarray(g.attempts) == 2).all()
    assert len(value_data.to_host(g, 0, 161)) == 0


def test_build_resumes_and_refuses_another_data_set(tmp_path):
    path = tmp_path / "value9.npz"
    first = value_data.build(path, SL, RL, N, games_total=GAMES, batch=GAMES, seed=2)
    assert first["games"] == GAMES and first["new_positions"] == first["positions"] > 0
    before = value_store.load(path)
    # games_total 100 rounds up to whole batches: 128 games, the first 64 kept as they were.
    second = value_data.build(path, SL, RL, N, games_total=100, batch=GAMES, seed=2)
    assert second["games"] == 2 * GAMES and second["positions"] == first["positions"] + second["new_positions"]
    after = value_store.load(path)
    m = len(before)
    for name in ("outcome", "u", "game", "moves"):
        np.testing.assert_array_equal(getattr(after, name)[:m], getattr(before, name), err_msg=name)
    np.testing.assert_array_equal(after.position.board[:m], before.position.board)
    assert after.game[:m].max() < GAMES <= after.game[m:].min() and after.game.max() < 2 * GAMES
    assert (after.u >= 1).all() and (after.u <= value_data.default_u_max(N)).all()
    assert value_data.default_u_max(N) == 101  # round(450 · 81 / 361) = round(100.97)
    # moves hold a_1 … a_U only; replaying them gives the stored position again
    assert ((after.moves >= 0).sum(axis=1) == after.u).all()
    padded = np.full((GAMES, 2 * N * N), -1, np.int32)  # the shape the replayed fixture compiled
    padded[:, : after.moves.shape[1]] = after.moves[:GAMES]
    again = from_pgx(value_data.replay_states(padded, N))
    np.testing.assert_array_equal(np.asarray(again.board), after.position.board[:GAMES])
    # held out: one game in 20 by index, 19, 39, …, 119 (6 of 128), whichever of them gave a position
    train, test = value_store.load_split(path)
    assert set(test.game.tolist()) <= {19, 39, 59, 79, 99, 119} and len(test) + len(train) == len(after)
    assert set(test.game.tolist()) == set(after.game.tolist()) & {19, 39, 59, 79, 99, 119}
    # complete: nothing more to do, the file is left as it is
    mtime = path.stat().st_mtime_ns
    third = value_data.build(path, SL, RL, N, games_total=2 * GAMES, batch=GAMES, seed=2)
    assert third["new_positions"] == 0 and path.stat().st_mtime_ns == mtime
    # another seed, or another network, is another data set
    with pytest.raises(value_data.ValueDataError, match=r"\(seed differ\)"):
        value_data.build(path, SL, RL, N, games_total=3 * GAMES, batch=GAMES, seed=3)
    other = (SL_CONFIG, _row_policy(4))
    with pytest.raises(value_data.ValueDataError, match=r"\(sl differ\)"):
        value_data.build(path, other, RL, N, games_total=3 * GAMES, batch=GAMES, seed=2)
    broken = tmp_path / "broken.npz"
    broken.write_bytes(b"not a zip")
    with pytest.raises(value_data.ValueDataError, match="not this value data set"):
        value_data.build(broken, SL, RL, N, games_total=GAMES, batch=GAMES)
    with pytest.raises(value_data.ValueDataError, match="no value data set"):
        value_store.load(tmp_path / "missing.npz")
    assert (tmp_path / "missing.npz").exists() is False and sorted(p.name for p in tmp_path.iterdir()) == [
        "broken.npz",
        "value9.npz",
    ]  # no temporary file left behind


def _same(a: value_store.ValuePositions, b: value_store.ValuePositions) -> None:
    order_a, order_b = np.argsort(a.game), np.argsort(b.game)
    for name in ("outcome", "u", "game", "moves", "attempts"):
        np.testing.assert_array_equal(getattr(a, name)[order_a], getattr(b, name)[order_b], err_msg=name)
    np.testing.assert_array_equal(a.position.board[order_a], b.position.board[order_b])


def test_a_directory_is_appended_to_and_a_save_killed_halfway_is_taken_back(tmp_path, monkeypatch):
    """The directory form holds what the .npz form holds; each save appends (to test, then train); a build killed
    between the two appends leaves test one commit ahead, which readers ignore and the next build takes back."""
    whole = tmp_path / "whole.npz"
    value_data.build(whole, SL, RL, N, games_total=2 * GAMES, batch=GAMES, seed=2)
    d = tmp_path / "value9"
    value_data.build(d, SL, RL, N, games_total=GAMES, batch=GAMES, seed=2, save_every_seconds=0)
    one_save = {name: columns.meta(d / name)[1] for name in ("train", "test")}
    append = columns.append

    def killed_at_train(path, rows, meta=None):
        if str(path).endswith("train"):
            raise KeyboardInterrupt  # the kill, after test's append of the second save
        return append(path, rows, meta)

    monkeypatch.setattr(columns, "append", killed_at_train)
    with pytest.raises(KeyboardInterrupt):
        value_data.build(d, SL, RL, N, games_total=2 * GAMES, batch=GAMES, seed=2, save_every_seconds=0)
    monkeypatch.setattr(columns, "append", append)
    assert columns.meta(d / "test")[1] > one_save["test"]  # held-out games of 79, 99, 119 got in before the kill
    train, test = value_store.load_split(d)  # ... and readers do not see it
    assert (len(train), len(test)) == (one_save["train"], one_save["test"]) and test.game.max() < GAMES
    assert isinstance(train.position.board, np.memmap) and isinstance(test.moves, np.memmap)
    report = value_data.build(d, SL, RL, N, games_total=2 * GAMES, batch=GAMES, seed=2, save_every_seconds=0)
    assert report["games"] == 2 * GAMES and report["positions"] == len(value_store.load(whole))
    w_train, w_test = value_store.load_split(whole)
    train, test = value_store.load_split(d)
    _same(train, w_train)
    _same(test, w_test)  # those games once, not twice
    with pytest.raises(value_data.ValueDataError, match=r"\(seed differ\)"):
        value_data.build(d, SL, RL, N, games_total=3 * GAMES, batch=GAMES, seed=3)
    (d / "train" / "columns.json").write_text("{}")
    with pytest.raises(value_data.ValueDataError, match="not a readable value data set") as e:
        value_store.load_split(d)
    assert "\n" not in str(e.value)


# --- training -----------------------------------------------------------------------------------------------------


def _counting(count: int, seed: int) -> Positions:
    """9x9 positions whose outcome is +1 exactly when the player to move has more stones on the board: a target the
    first planes show (own / opponent stones) and no symmetry changes. Each position has 10 to 40 stones, each the
    player's own with probability 0.3 or 0.7 (half the positions each), ties dropped."""
    rng = np.random.default_rng(seed)
    boards: list[np.ndarray] = []
    while len(boards) < count:
        stones = rng.integers(10, 41)
        own = rng.random(stones) < rng.choice([0.3, 0.7])
        if 2 * own.sum() == stones:
            continue
        board = np.zeros(N * N, np.int8)
        board[rng.choice(N * N, stones, replace=False)] = np.where(own, 1, -1)
        boards.append(board)
    board = np.stack(boards)
    outcome = np.where((board == 1).sum(1) > (board == -1).sum(1), 1, -1).astype(np.int8)
    return Positions(
        position=Position(
            board=board,
            turns_since=np.where(board != 0, 8, 0).astype(np.int8),
            ko=np.full(count, -1, np.int32),
            black_to_move=np.ones(count, bool),
        ),
        action=np.zeros(count, np.int32),
        outcome=outcome,
        game=np.arange(count, dtype=np.int32),
        move_number=np.zeros(count, np.int32),
    )


CONFIG = value_training.ValueConfig(
    size=N, filters=8, layers=2, hidden=16, planes=4, batch_size=32, learning_rate=0.05, steps=300, eval_every=100,
    checkpoint_every=100,
)  # fmt: skip


class _Interrupt(Exception):
    pass


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A run interrupted at step 200 (by its log callback, before that step's checkpoint) and resumed from 100."""
    run_dir = str(tmp_path_factory.mktemp("value"))
    train, test = _counting(2000, 0), _counting(300, 1)

    first: list[dict] = []

    def stop_at_200(metrics):
        first.append(metrics)
        if metrics["step"] == 200:
            raise _Interrupt

    with pytest.raises(_Interrupt):
        value_training.train(CONFIG, train, test, run_dir, log=stop_at_200)
    lines: list[dict] = []
    last = value_training.train(CONFIG, train, test, run_dir, log=lines.append)
    return run_dir, test, first + lines, last


def test_mse_training_learns_a_visible_target(trained):
    # Labels are balanced ±1, so predicting 0 gives MSE 1 (and the best constant about 1 too). The count is a sum
    # over the board the dense layer can form; 0.3 leaves room for the 300 small SGD steps.
    _, _, _, last = trained
    assert last["step"] == 300 and last["test_mse"] < 0.3, last
    assert last["train_mse"] < 0.5


def test_resume_continues_from_the_last_checkpoint(trained):
    run_dir, test, all_lines, last = trained
    # The interrupted call logged 100 and 200; the resumed one started at checkpoint 100, so its first line (step 200)
    # averages 100 steps, not 200, and took the same 100 steps (step t's minibatch and key come from t): the same
    # held-out MSE at 200, to the bit.
    first, lines = all_lines[:2], all_lines[2:]
    assert [(m["step"], m["averaged_steps"]) for m in lines] == [(200, 100), (300, 100)]
    assert lines[0]["test_mse"] == first[1]["test_mse"] and first[1]["step"] == 200
    written = [json.loads(line)["step"] for line in open(f"{run_dir}/metrics.jsonl")]
    assert written == [100, 200, 300]  # the interrupted call's line 200 was dropped on resume and written again
    config, params, step = value_training.restore_params(run_dir)
    assert config == CONFIG and step == 300
    assert value_training.evaluate(config, params, test) == pytest.approx(last["test_mse"], rel=1e-5)
    # done: a further call trains nothing
    assert value_training.train(CONFIG, test, test, run_dir, log=lines.append) == {}
    assert len(lines) == 2


def test_mse_by_move_of_the_value_network_adds_up(trained):
    run_dir, test, _, last = trained
    config, params, _ = value_training.restore_params(run_dir)
    moves = np.arange(len(test)) % 30 + 1  # move numbers 1 … 30
    rows = value_training.mse_by_move(value_training.value_fn(config, params), test.position, test.outcome, moves,
                                      bins=[1, 11, 21, 31], batch_size=64)  # fmt: skip
    assert [r["positions"] for r in rows] == [100, 100, 100]
    assert np.mean([r["mse"] for r in rows]) == pytest.approx(last["test_mse"], rel=1e-4)


def test_another_config_or_a_missing_run_is_one_line(trained, tmp_path):
    run_dir, test, _, _ = trained
    other = value_training.ValueConfig(**{**CONFIG.__dict__, "hidden": 8})
    with pytest.raises(value_training.ValueRunError, match="hidden"):
        value_training.train(other, test, test, run_dir, log=lambda m: None)
    with pytest.raises(value_training.ValueRunError, match="not a value-network run"):
        value_training.restore_params(str(tmp_path))
    with pytest.raises(value_training.ValueRunError, match="checkpoint 12345 cannot be read"):
        value_training.restore_params(run_dir, 12345)


def test_mse_by_move_by_hand():
    # values 0, 0.5, −1, 1, 0.3 for outcomes 1, 1, 1, −1, 1 at moves 1, 5, 12, 30, 50; bins [1, 10), [10, 20), [20, 40):
    # (1 − 0)² = 1 and (1 − 0.5)² = 0.25 → 0.625; (1 + 1)² = 4; (−1 − 1)² = 4; move 50 is in no bin.
    values = np.array([0.0, 0.5, -1.0, 1.0, 0.3])
    calls = []

    def identity(batch):
        calls.append(len(batch))
        return batch

    rows = value_training.mse_by_move(identity, values, np.array([1, 1, 1, -1, 1]), np.array([1, 5, 12, 30, 50]),
                                      bins=[1, 10, 20, 40], batch_size=3)  # fmt: skip
    assert [(r["from"], r["to"], r["positions"]) for r in rows] == [(1, 9, 2), (10, 19, 1), (20, 39, 1)]
    assert [r["mse"] for r in rows] == pytest.approx([0.625, 4.0, 4.0])
    assert calls == [3, 3]  # 4 positions in bins: slices of 3, the second padded with repeats


# --- rollouts ------------------------------------------------------------------------------------------------------


def _states(*histories: list[int]) -> pgx.State:
    """pgx states after each history, replayed in the shape the fixture `replayed` compiled ([64, 162] moves)."""
    moves = np.full((GAMES, 2 * N * N), -1, np.int32)
    for i, h in enumerate(histories):
        moves[i, : len(h)] = h
    return jax.tree.map(lambda x: x[: len(histories)], value_data.replay_states(moves, N))


def test_rollout_values_by_hand():
    # One policy for every game: Black's first move of the game is the centre (40) or a pass, one chance in two
    # each; every other move is a pass. pgx ends a game after two passes and scores it by area with komi 7.5.
    # * after Black's pass, White to move: White passes, the game ends with an empty board, 0 − 7.5 < 0: White wins,
    #   +1 for White;
    # * after Black's stone at the centre, White to move: two passes, Black's area is 81 > 7.5: −1 for White;
    # * after that stone and White's pass, Black to move: one pass ends it: +1 for Black;
    # * the empty board, Black to move: +1 (centre) or −1 (pass), mean 0 over independent rollouts. k = 400: standard
    #   deviation of the mean 1 / sqrt(400) = 0.05, so |mean| < 0.2 (4 sd); had the k copies shared their
    #   randomness, it would be exactly ±1.
    def coin(states, key):
        heads = jax.random.bernoulli(key, 0.5, states.current_player.shape)
        return jnp.where((states._x.step_count == 0) & heads, 40, 81).astype(jnp.int32)

    states = _states([81], [40], [40, 81], [])
    values = np.asarray(value_training.rollout_values(coin, states, jax.random.key(1), 400))
    np.testing.assert_array_equal(values[:3], [1.0, -1.0, 1.0])
    assert abs(values[3]) < 0.2, values


# --- validation ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field, value",
    [("size", 13), ("planes", 47), ("layers", 1), ("hidden", 0), ("learning_rate", float("inf")), ("steps", 0),
     ("batch_size", 0), ("eval_every", 0), ("seed", -1)],
)  # fmt: skip
def test_invalid_value_config_is_one_line(field, value):
    with pytest.raises(ValueError, match=f"^ValueConfig: invalid {field}="):
        value_training.ValueConfig(**{"size": 9, field: value})


@pytest.mark.parametrize(
    "kwargs, needle",
    [({"u_range": (0, 5)}, "u_range"), ({"u_range": (5, 4)}, "u_range"), ({"u_range": (1, 162)}, "u_range"),
     ({"games": 0}, "multiple"), ({"temperature": 0.0}, "temperature")],
)  # fmt: skip
def test_invalid_generate_arguments(kwargs, needle):
    args = {"games": GAMES, "key": jax.random.key(0), "size": N, **kwargs}
    with pytest.raises(ValueError, match=needle):
        value_data.generate(SL, RL, **args)
    with pytest.raises(ValueError, match="not 19x19"):
        value_data.generate(SL, RL, GAMES, jax.random.key(0), 19)

"""KataGo's auxiliary ownership and score targets (Wu, "Accelerating Self-Play Learning in Go", 2019, section "Auxiliary
Ownership and Score Targets"; Config.aux_ownership_weight, aux_score_weight): Go's area ownership and margin of
hand-built positions, their sign for each colour, the replay plumbing, a real training iteration, and that with the
weights at 0 nothing changes."""

import dataclasses
import re

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from pgx._src.games import go as pgx_go

import envs
from az_jax.core import config as config_lib
from az_jax.core import iteration as iteration_lib
from az_jax.core import learner, networks, replay
from az_jax.core import overrides as overrides_lib
from az_jax.core import presets as presets_lib
from az_jax.core.devices import make_mesh
from az_jax.runtime import checkpoint as ckpt
from az_jax.runtime.trainer import Trainer
from envs import go_scoring

from conftest import TINY_NETWORK, fast_compiles_here

pytestmark = pytest.mark.usefixtures("fast_compiles")  # tiny programs: XLA's optimisation passes off (conftest.py)


GO = "go_9x9"
ENV = envs.make_env(GO)[0]
N = 9


def board(rows: list[str]) -> np.ndarray:
    """9 strings of 9 ("X" Black, "O" White, "." empty; row r is pgx points 9r..9r+8) -> pgx's board [81]: each chain
    named by its smallest point + 1, positive for Black, negative for White (pgx/_src/games/go.py)."""
    colour = np.array([[{"X": 1, "O": -1, ".": 0}[c] for c in row] for row in rows]).reshape(-1)
    out = np.zeros(N * N, np.int32)
    for start in range(N * N):
        if colour[start] == 0 or out[start]:
            continue
        chain, stack = [start], [start]
        while stack:
            p = stack.pop()
            r, c = divmod(p, N)
            for q in [p - N if r else -1, p + N if r < N - 1 else -1, p - 1 if c else -1, p + 1 if c < N - 1 else -1]:
                if q >= 0 and colour[q] == colour[start] and q not in chain:
                    chain.append(q)
                    stack.append(q)
        out[chain] = colour[start] * (min(chain) + 1)
    return out


WALL = board(["....XO..."] * 9)  # Black's wall on column 4, White's on column 5
NEUTRAL = board(["...X.O..."] * 9)  # column 4 empty between the walls
DEAD = board(["O...XO..."] + ["....XO..."] * 8)  # WALL plus a White stone at point 0, inside Black's side


@jax.jit
def go_state(points: np.ndarray, step_count: int, key: jax.Array):
    """A pgx go_9x9 state with board `points` at ply `step_count` (even: Black to move), pgx's player order from
    `key`; legal mask and observation recomputed. Jitted: one compiled program instead of pgx's many eager ops."""
    state = ENV.init(key)
    board_, ply = jnp.asarray(points, jnp.int32), jnp.asarray(step_count, jnp.int32)
    history = state._x.board_history.at[0].set(jnp.clip(board_, -1, 1))
    x = state._x._replace(board=board_, board_history=history, step_count=ply)
    state = state.replace(_x=x, current_player=state._player_order[x.color], _step_count=ply)
    state = state.replace(legal_action_mask=ENV._game.legal_action_mask(x))
    return state.replace(observation=ENV.observe(state))


def test_area_ownership_and_margin_of_hand_built_positions():
    own = jax.jit(go_scoring.black_ownership)
    wall, neutral, dead = (np.asarray(own(b)).reshape(N, N) for b in (WALL, NEUTRAL, DEAD))
    # WALL: columns 0-3 (36 empty points) reach only Black's wall, 6-8 (27) only White's: Black owns 36 + 9 stones
    # = 45, White 27 + 9 = 36; Black's sum 45 − 36 = 9, margin 9 − 7.5 komi = +1.5 (Black wins by 1.5).
    assert (wall[:, :5] == 1).all() and (wall[:, 5:] == -1).all()
    # NEUTRAL: column 4's empty points reach both walls: nobody's. 36 − 36 = 0, margin −7.5 (White by komi).
    assert (neutral[:, :4] == 1).all() and (neutral[:, 4] == 0).all() and (neutral[:, 5:] == -1).all()
    # DEAD: the White stone at point 0 counts as alive (Tromp-Taylor): Black's 35 empty points now reach both colours,
    # so Black keeps its 9 stones, White 36 + 1 = 37, 35 nobody's; margin 9 − 37 − 7.5 = −35.5.
    assert dead[0, 0] == -1 and (dead[:, 4] == 1).all() and (dead[:, 5:] == -1).all()
    assert (dead[:, :4] == 0).sum() == 35
    for points, margin in [(WALL, 1.5), (NEUTRAL, -7.5), (DEAD, -35.5)]:
        assert float(own(points).sum()) - go_scoring.KOMI == margin
        # pgx's own area count (which also gives an empty region reaching no stone to both) differs by the same
        scores = pgx_go._count_scores(pgx_go.GameState(board=jnp.asarray(points)), N)
        assert float(scores[0] - scores[1]) - ENV._game.komi == margin
    assert float(own(np.zeros(N * N, np.int32)).sum()) == 0  # the empty board: every point reaches neither colour


def test_targets_per_player_id_flip_for_white():
    final = jax.jit(go_scoring.final_targets)
    black_view = np.asarray(jax.jit(go_scoring.black_ownership)(WALL))
    for seed in range(4):  # pgx draws which player id plays Black; these keys give both orders
        state = go_state(WALL, 10, jax.random.key(seed))
        ownership, margin = final(state)
        black = int(state._player_order[0])  # player order maps colour -> player id, and back
        np.testing.assert_array_equal(ownership[black], black_view)
        np.testing.assert_array_equal(ownership[1 - black], -black_view)  # White's view: every owner flipped
        assert margin[black] == 1.5 and margin[1 - black] == -1.5  # Black wins by 1.5, White loses by 1.5


def test_resolve_gives_each_mover_its_own_view():
    # 2 games (slots), 2 plies each, capacity 4: ply 0 written at rows 0, 1 and ply 1 at rows 2, 3; the mover at
    # ply t is player id t (alternating). Game 0 ends after ply 1; game 1 is still going.
    # (jitted: one program each instead of many eager ops)
    buf = jax.jit(lambda: replay.init(4, (N, N, 17), jnp.bool_, N * N + 1, keep_ownership=True, keep_score=True))()
    add = jax.jit(
        lambda buf, t: replay.add(
            buf,
            t,
            jnp.zeros((2, N, N, 17), jnp.bool_),
            jnp.zeros((2, N * N + 1)),
            jnp.ones((2, N * N + 1), jnp.bool_),
            jnp.full(2, t, jnp.int32),
            jnp.zeros(2, jnp.int32),
        )
    )
    for t in range(2):
        buf = add(buf, jnp.int32(t))
    owner = jnp.asarray(jax.jit(go_scoring.black_ownership)(WALL), jnp.float32)
    final = (jnp.stack([owner, -owner])[None].repeat(2, 0), jnp.float32([[1.5, -1.5]] * 2))  # player 0 has Black
    buf = jax.jit(replay.resolve)(
        buf, jnp.bool_([True, False]), jnp.zeros(2, jnp.int32), jnp.float32([[1, -1]] * 2), final
    )
    assert buf.done.tolist() == [True, False, True, False]
    np.testing.assert_array_equal(buf.ownership[0], owner)  # row 0: game 0, player 0 (Black)
    np.testing.assert_array_equal(buf.ownership[2], -owner)  # row 2: game 0, player 1 (White)
    assert buf.score.tolist() == [1.5, 0.0, -1.5, 0.0] and buf.ownership.dtype == jnp.int8
    assert not buf.ownership[1].any()  # game 1's rows wait for its end
    batch = jax.jit(replay.sample, static_argnums=2)(buf, jax.random.key(0), 8)
    assert set(np.asarray(batch.score).tolist()) <= {1.5, -1.5}  # only done rows are drawn


def test_resolve_marks_resigned_games_unscored():
    # 2 games, 1 ply each, capacity 2: row b is game b's position. Both end on this ply, game 0 by the rules (scored),
    # game 1 by resignation (its final targets are whatever the stepped board gives, and must not be learnt).
    buf = jax.jit(lambda: replay.init(2, (N, N, 17), jnp.bool_, N * N + 1, keep_score=True, keep_scored=True))()
    buf = jax.jit(replay.add)(
        buf,
        jnp.int32(0),
        jnp.zeros((2, N, N, 17), jnp.bool_),
        jnp.zeros((2, N * N + 1)),
        jnp.ones((2, N * N + 1), jnp.bool_),
        jnp.zeros(2, jnp.int32),
        jnp.zeros(2, jnp.int32),
    )
    assert buf.scored.tolist() == [False, False]  # written, game not over
    final = (jnp.zeros((2, 2, N * N), jnp.int8), jnp.float32([[1.5, -1.5], [20.5, -20.5]]))
    buf = jax.jit(replay.resolve)(
        buf, jnp.bool_([True, True]), jnp.zeros(2, jnp.int32), jnp.float32([[1, -1], [-1, 1]]), final, jnp.bool_([0, 1])
    )
    assert buf.done.tolist() == [True, True] and buf.scored.tolist() == [True, False]
    assert buf.outcome.tolist() == [1.0, -1.0]  # the resigner (player 0 of game 1) still loses: z is kept
    batch = jax.jit(replay.sample, static_argnums=2)(buf, jax.random.key(0), 64)
    # each drawn row carries its own weight: 1 with game 0's score 1.5, 0 with game 1's 20.5
    np.testing.assert_array_equal(np.asarray(batch.aux_weight), np.asarray(batch.score) == 1.5)
    assert 0 < float(batch.aux_weight.sum()) < 64
    # Without resignation nothing is kept and every game counts.
    plain = jax.eval_shape(lambda: replay.init(2, (N, N, 17), jnp.bool_, N * N + 1, keep_score=True))
    assert plain.scored is None


def test_aux_losses_leave_out_resigned_games():
    # Two positions on 81 points. Row 0: ownership logit 0 everywhere (ô = 0), target +1: −log σ(0) = log 2 = 0.6931 a
    # point; score ŝ = 0.1 against 8.1 / 81 = 0.1: 0. Row 1: logit +10 against target −1: −log σ(−20) = 20.0 a point
    # (20 + log(1 + e^−20)); score ŝ = 0 against 81 / 81 = 1: (0 − 1)² = 1.
    logit = jnp.stack([jnp.zeros(81), jnp.full(81, 10.0)])
    score = jnp.float32([0.1, 0.0])
    batch = replay.Batch(
        observation=jnp.zeros((2, N, N, 17)),
        policy=jnp.zeros((2, 82)),
        legal=jnp.ones((2, 82), jnp.bool_),
        outcome=jnp.zeros(2),
        ownership=jnp.stack([jnp.ones(81), -jnp.ones(81)]),
        score=jnp.float32([8.1, 81.0]),
    )
    losses = lambda weight: learner.aux_losses(logit, score, batch.replace(aux_weight=weight), 1.5, 1.0)
    # every game scored (no weights): the batch means (0.6931 + 20) / 2 = 10.35 and (0 + 1) / 2 = 0.5
    own, sc = learner.aux_losses(logit, score, batch, 1.5, 1.0)
    assert float(own) == pytest.approx(10.3466, abs=1e-3) and float(sc) == pytest.approx(0.5, abs=1e-6)
    assert [float(x) for x in losses(jnp.float32([1, 1]))] == pytest.approx([float(own), float(sc)])
    # row 1's game resigned: row 0 alone
    own, sc = losses(jnp.float32([1, 0]))
    assert float(own) == pytest.approx(np.log(2), abs=1e-6) and float(sc) == pytest.approx(0.0, abs=1e-6)
    # no scored game in the batch: no auxiliary loss at all (not a division by zero)
    assert [float(x) for x in losses(jnp.float32([0, 0]))] == [0.0, 0.0]


def test_symmetries_move_ownership_with_the_board():
    state = go_state(WALL, 0, jax.random.key(0))  # Black to move: +1 on columns 0-4
    n = 32
    batch = replay.Batch(
        observation=jnp.repeat(state.observation[None], n, 0),
        policy=jnp.zeros((n, N * N + 1)),
        legal=jnp.ones((n, N * N + 1), jnp.bool_),
        outcome=jnp.ones(n),
        ownership=jnp.repeat(jnp.asarray(go_scoring.black_ownership(WALL), jnp.float32)[None], n, 0),
        score=jnp.full(n, 1.5),
    )
    out = jax.jit(replay.augment, static_argnums=2)(batch, jax.random.key(1), GO)
    own, obs = np.asarray(out.ownership).reshape(n, N, N), np.asarray(out.observation)
    # The mover's stones (plane 0) stay on points it owns, the opponent's (plane 1) on points it does not, whatever
    # symmetry moved the walls; a wall turned horizontal (e.g. the transpose) fails this unless ownership turned too.
    assert (own[obs[..., 0]] == 1).all() and (own[obs[..., 1]] == -1).all()
    assert ((own == 1).sum(axis=(1, 2)) == 45).all() and (out.score == 1.5).all()
    assert not (own == own[:1, :, :]).all()  # some symmetry did move the board


def _config(*extra: str) -> config_lib.Config:
    return overrides_lib.override(
        presets_lib.preset(GO, "small"),
        [
            *TINY_NETWORK,
            "selfplay_steps=2",
            "replay_capacity=32",
            "min_replay_size=16",
            "learning_rates=0.05",
            "lr_boundaries=",
            "train_ratio=1",
            "eval_every=0",
            "aux_ownership_weight=0",  # the go_9x9 small preset has them on; each test says what it wants
            "aux_score_weight=0",
            *extra,
        ],
    ).validate()


def _networks():
    plain = networks.make_network(_config(), ENV.num_actions)
    aux = networks.make_network(_config("aux_ownership_weight=1.5", "aux_score_weight=1"), ENV.num_actions)
    return plain, aux


@pytest.fixture(scope="module")
def fixed_batch():
    """16 positions: 8 random 9×9 boards (each point Black, White, empty with odds 1 : 1 : 7) seen by Black and by
    White, with their final targets."""
    rng = np.random.default_rng(0)
    with fast_compiles_here():
        return _fixed_batch(rng)


def _fixed_batch(rng: np.random.Generator) -> replay.Batch:
    @jax.jit
    def position(points, colour):  # step_count 0: Black to move, 1: White
        state = go_state(points, colour, jax.random.key(0))
        ownership, margin = go_scoring.final_targets(state)
        return state.observation, ownership[state.current_player], margin[state.current_player]

    states, owners, margins = [], [], []
    for _ in range(8):
        points = board(["".join(rng.choice(list("XO......."), N)) for _ in range(N)])
        for colour in (0, 1):
            observation, ownership, margin = position(points, colour)
            states.append(observation)
            owners.append(ownership)
            margins.append(margin)
    legal = jnp.ones((16, N * N + 1), jnp.bool_)
    return replay.Batch(
        observation=jnp.stack(states),
        policy=legal / legal.sum(-1, keepdims=True),
        legal=legal,
        outcome=jnp.sign(jnp.stack(margins)),
        ownership=jnp.stack(owners),
        score=jnp.stack(margins),
    )


@pytest.fixture(scope="module")
def initial_variables(fixed_batch):
    """flax's initial variables of the plain and the aux network from the same key, shared by the tests below."""
    obs = fixed_batch.observation.astype(jnp.float32)
    init = lambda net: jax.jit(lambda key: net.init(key, obs, train=False))(jax.random.key(0))
    with fast_compiles_here():
        return tuple(init(net) for net in _networks())


def test_with_weights_zero_the_network_and_loss_are_unchanged(fixed_batch, initial_variables):
    plain, aux = _networks()
    plain_vars, aux_vars = initial_variables
    # the heads are the only new parameters: a 1×1 conv from 8 channels (8 + 1 bias) and one unit on 8 hidden (8 + 1)
    assert set(aux_vars["params"]) - set(plain_vars["params"]) == {"ownership_head", "score_head"}
    assert (
        aux_vars["params"]["ownership_head"]["kernel"].size == 8 and aux_vars["params"]["score_head"]["bias"].size == 1
    )
    shared = {k: v for k, v in aux_vars["params"].items() if k in plain_vars["params"]}
    jax.tree.map(np.testing.assert_array_equal, shared, plain_vars["params"])  # same names, same initial values
    # The default config builds no head and keeps no targets in the buffer (shapes only: nothing runs).
    assert not (plain.ownership_head or plain.score_head)
    setup = iteration_lib.make_setup(_config())
    buffer = jax.eval_shape(lambda: iteration_lib.init_state(setup, 0)).replay
    assert buffer.ownership is None and buffer.score is None
    plain_apply, aux_apply = learner.learning_apply(plain), learner.learning_apply(aux, aux=True)
    loss = jax.jit(learner.loss_fn, static_argnums=(2, 4, 5, 6))
    base, (_, base_metrics) = loss(plain_vars["params"], plain_vars["batch_stats"], plain_apply, fixed_batch, 0.0, 0, 0)
    assert set(base_metrics) == {"loss", "policy_loss", "value_loss", "l2"}
    # The aux network with the weights at 0 (and c = 0: its heads' parameters would add to c‖θ‖²): the same loss, bit
    # for bit, and the same metrics.
    same, (_, same_metrics) = loss(aux_vars["params"], aux_vars["batch_stats"], aux_apply, fixed_batch, 0.0, 0, 0)
    assert float(same) == float(base) and same_metrics.keys() == base_metrics.keys()
    on, (_, metrics) = loss(aux_vars["params"], aux_vars["batch_stats"], aux_apply, fixed_batch, 0.0, 1.5, 2.0)
    assert float(on) == pytest.approx(float(base) + 1.5 * metrics["ownership_loss"] + 2.0 * metrics["score_loss"])
    # untrained: ô = 0 everywhere would give exactly log 2 = 0.693 per point; these initial weights give 0.94
    assert 0.5 < float(metrics["ownership_loss"]) < 1.0


def test_gradient_steps_reduce_the_aux_losses_on_a_fixed_batch(fixed_batch, initial_variables):
    _, aux = _networks()
    variables = initial_variables[1]
    optimizer = learner.make_optimizer(dataclasses.replace(_config(), learning_rates=(0.05,), lr_boundaries=()))
    step = jax.jit(
        lambda p, s, o: learner.train_step(
            p,
            s,
            o,
            fixed_batch,
            apply_fn=learner.learning_apply(aux, aux=True),
            optimizer=optimizer,
            weight_decay=1e-4,
            axis_name=None,
            ownership_weight=1.5,
            score_weight=1.0,
        )
    )
    params, stats, opt = variables["params"], variables["batch_stats"], optimizer.init(variables["params"])
    history = []
    for _ in range(40):
        params, stats, opt, metrics = step(params, stats, opt)
        history.append((float(metrics["ownership_loss"]), float(metrics["score_loss"])))
    # Many points of these scattered boards reach both colours (targets o = 0, 79.6% of them), where the cross-entropy
    # cannot go below log 2: its floor is 0.796 · 0.693 = 0.552. Measured: 0.936 → 0.636 (the excess over the floor
    # 0.384 → 0.084), and the score's squared error 0.355 → 0.005.
    floor = float((fixed_batch.ownership == 0).mean()) * np.log(2)
    (own0, score0), (own1, score1) = history[0], history[-1]
    assert own1 - floor < 0.35 * (own0 - floor) and score1 < 0.1 * score0


def test_one_iteration_scores_finished_games_for_each_mover(tmp_path):
    """A real training iteration (2 devices) from 8 games two plies before pgx's cap of 162: Black moves, White
    moves, every game is scored, and its two positions are resolved and trained on with the auxiliary losses."""
    config = _config("aux_ownership_weight=1.5", "aux_score_weight=1", "batch_size=16")
    trainer = Trainer(config, make_mesh())
    state = trainer.init_state()
    assert state.replay.ownership.shape == (32, 81) and state.replay.score.shape == (32,)
    near_end = jax.vmap(lambda key: go_state(WALL, 160, key))(jax.random.split(jax.random.key(5), 8))
    games = state.games.replace(env=jax.device_put(near_end, trainer.shardings.games))
    state, metrics = trainer.iterate(state.replace(games=games))
    metrics = jax.tree.map(float, metrics)
    assert metrics["selfplay/games_finished"] == 8 and metrics["train/steps"] > 0
    assert 0 < metrics["train/ownership_loss"] < 2 and 0 <= metrics["train/score_loss"] < 10
    buf = jax.tree.map(np.asarray, state.replay)
    assert buf.done.sum() == 16  # 8 games × 2 positions
    # Each device holds 4 games in rows 16d + (4t + b) for ply t, local game b: rows 0-3 Black's, 4-7 White's.
    rows = np.arange(32).reshape(2, 4, 4)  # [device, ply, game]
    black, white = rows[:, 0].ravel(), rows[:, 1].ravel()
    assert not buf.observation[black, 0, 0, 16].any() and buf.observation[white, 0, 0, 16].all()  # pgx's colour plane
    np.testing.assert_array_equal(buf.ownership[white], -buf.ownership[black])  # the same final board, flipped
    np.testing.assert_array_equal(buf.score[white], -buf.score[black])
    # Black's margin is its ownership summed minus komi, and its sign is the game's result for Black (z).
    np.testing.assert_array_equal(buf.score[black], buf.ownership[black].sum(axis=1) - 7.5)
    np.testing.assert_array_equal(np.sign(buf.score[black]), buf.outcome[black])
    # From WALL (Black +1.5) two moves change few points: Black's own wall stays Black's in every game.
    assert (buf.ownership[black].reshape(8, 9, 9)[:, :, 4] == 1).all()

    # A checkpoint keeps the targets: saved and restored, the buffer is the same, ownership and score included.
    manager = ckpt.make_manager(str(tmp_path / "run"))
    ckpt.save(manager, state, config)
    manager.wait_until_finished()
    restored = ckpt.restore(manager, int(state.iteration), trainer.abstract_state(), config)
    chex.assert_trees_all_equal(jax.device_get(restored.replay), jax.device_get(state.replay))


@pytest.mark.parametrize(
    ("game", "assignments", "message"),
    [
        ("connect_four", ["aux_score_weight=1"], "connect_four has none (its final board is aux_ownership_weight's"),
        ("tic_tac_toe", ["aux_score_weight=1"], "tic_tac_toe does not (games that do: go_9x9, go_19x19)"),
        ("tic_tac_toe", ["aux_ownership_weight=1"], "tic_tac_toe does not (games that do: connect_four, go_9x9, go_19"),
        (GO, ["aux_score_weight=-1"], "aux_score_weight must be >= 0, got -1.0"),
        (GO, ["aux_ownership_weight=nan"], "aux_ownership_weight must be a finite number"),
    ],
)
def test_config_errors_are_one_line(game, assignments, message):
    with pytest.raises(config_lib.ConfigError, match=re.escape(message)) as error:
        overrides_lib.override(presets_lib.preset(game, "small"), assignments).validate()
    assert "\n" not in str(error.value)


def test_aux_keys_are_off_by_default_and_on_for_go():
    assert not config_lib.Config().aux_targets  # 0.0 by default: the papers' network and loss
    for name in ("paper", "alphago_zero", "small_agz"):  # the papers' presets, and AlphaGo Zero's with resignation
        assert not presets_lib.preset(GO, name).aux_targets, name
    small = presets_lib.preset(GO, "small").validate()  # KataGo's weights in go_9x9's small preset
    assert (small.aux_ownership_weight, small.aux_score_weight) == (1.5, 1.0)
    on = overrides_lib.override(presets_lib.preset("go_19x19", "small"), ["aux_ownership_weight=1.5"]).validate()
    assert on.aux_targets and on.aux_score_weight == 0.0


def test_one_iteration_with_resignation_learns_ownership_from_played_out_games_only(tmp_path):
    """Resignation with the auxiliary targets: 8 games two plies before pgx's cap, resignation threshold 1 (above any
    value), so every game with resignation on resigns at its first ply (1 position, unscored) and every game played out
    to calibrate ends at the cap (2 positions, scored); the learner trains with the aux losses of the scored ones."""
    config = _config(
        "aux_ownership_weight=1.5",
        "aux_score_weight=1",
        "batch_size=16",
        "resign=true",
        "v_resign_init=1.0",
        "resign_disabled_fraction=0.5",
        "min_replay_size=8",  # fewer positions end here than in the test above (a resigned game leaves 1)
    )
    trainer = Trainer(config, make_mesh())
    state = trainer.init_state()
    assert state.replay.scored.shape == (32,)
    near_end = jax.vmap(lambda key: go_state(WALL, 160, key))(jax.random.split(jax.random.key(5), 8))
    games = state.games.replace(env=jax.device_put(near_end, trainer.shardings.games))
    played_out = int((~np.asarray(state.games.resign.allowed)).sum())  # the seed's draw: resignation off
    assert 0 < played_out < 8
    state, metrics = trainer.iterate(state.replace(games=games))
    metrics = jax.tree.map(float, metrics)
    buf = jax.tree.map(np.asarray, state.replay)
    # A resigned slot's fresh game draws resignation again: on, it resigns at its first ply too (ply 161); off, its
    # one position waits. So the played-out games end at the cap with 2 positions each, scored, and every resignation
    # (R of them) leaves exactly 1 position, unscored.
    finished = metrics["selfplay/games_finished"]
    resignations = round(metrics["resign/resigned_fraction"] * finished)
    assert finished == played_out + resignations and resignations >= 8 - played_out
    assert (buf.done & buf.scored).sum() == 2 * played_out and (buf.done & ~buf.scored).sum() == resignations
    assert not (buf.scored & ~buf.done).any() and buf.pending.sum() + buf.done.sum() == 16
    assert metrics["train/steps"] > 0 and 0 < metrics["train/ownership_loss"] < 2
    manager = ckpt.make_manager(str(tmp_path / "run"))  # the new field is saved and restored with the buffer
    ckpt.save(manager, state, config)
    manager.wait_until_finished()
    restored = ckpt.restore(manager, int(state.iteration), trainer.abstract_state(), config)
    chex.assert_trees_all_equal(jax.device_get(restored.replay), jax.device_get(state.replay))

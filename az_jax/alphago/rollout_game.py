"""The rollouts of APV-MCTS on a lean Go state that carries its chains from move to move (Silver et al., Nature
2016, Methods, "Rollout policy": p_π's patterns are updated incrementally, 2 µs a move on a CPU thread).

    z, end = play(policy, states, key, env)          # pgx Go states [B, ...] played to the end by p_π, z for the mover

Profiled on the 2-core VM (batch 256, positions from the middle of games; XLA CPU; a training run sharing the cores,
so the times are high, their ratios not), the rollout's move under pgx:
pgx's `env.step` 57 µs a position on 9×9 and 1,374 µs on 19×19 (its rules alone, `Game.step`, 29 and 863 µs: the
chains found again, the Zobrist hash of the board and the positional-superko check against every earlier position),
against 15 and 168 µs for p_π's features and 1 and 3 µs for the position. So the step, not the policy, was the
rollout's cost. Here a rollout keeps its own state (`Lean`): the board relative to the player to move, each stone's
chain label, each chain's liberty count, liberty sum and size (lean_chains.py), the ko point, the turns since each
stone was played, passes and moves so far; a move updates the labels where it merges or captures (features._play)
and the chains next to it and to what it captures, instead of finding the chains again, and p_π's features read
them instead of recomputing them, through lean_moves.move_features: only what p_π reads (liberties, legality,
liberties after a move capped at 2, own eyes), from the carried chain scalars and each point's 4 neighbours, where
features._move_features builds a W-word bitset per chain and gathers 4 of them for every point
(experiments/alphago/rollout_profile.py). pgx is used twice:
the start (its state) and the end (Tromp–Taylor area with the env's komi, pgx's own scorer).

The game is pgx's with one rule left out: positional superko (pgx ends a game lost for a player who repeats a whole
position; here only the simple ko is kept, as p_π's legality has it). Until such a repeat, a rollout here plays the
same moves as one stepped by pgx from the same key, and scores the same (tests/test_alphago_rollout_game.py).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import pgx
from flax import struct
from pgx._src.games import go as pgx_go

from az_jax.alphago import features as features_lib
from az_jax.alphago import lean_chains
from az_jax.alphago import rollout_policy as rollout_lib
from az_jax.alphago.position import Position, from_pgx
from az_jax.core.rows import where_rows


@struct.dataclass
class Lean:
    """B rollout games (all [B, ...])."""

    board: jax.Array  # [B, P] int8: +1 the player to move's stones, -1 the opponent's, 0 empty
    label: jax.Array  # [B, P] int32: each stone's chain label (its smallest point), P on empty points
    chains: lean_chains.Chains  # [B, P + 1] each: every chain's liberty count, liberty sum and size, by label
    ko: jax.Array  # [B] int32: the point the player to move may not play (simple ko), -1 none
    turns_since: jax.Array  # [B, P] int8: 1..7 turns since the stone was played, 8 for 8 or more, 0 empty
    black_to_move: jax.Array  # [B] bool
    passes: jax.Array  # [B] int32: consecutive passes just played
    steps: jax.Array  # [B] int32: moves played since the game began (pgx's step count)
    over: jax.Array  # [B] bool

    @property
    def position(self) -> Position:
        return Position(board=self.board, turns_since=self.turns_since, ko=self.ko, black_to_move=self.black_to_move)


def from_states(states: pgx.State) -> Lean:
    """The lean state of pgx Go states [B, ...]; chain labels found once here."""
    position = from_pgx(states)
    n = position.size
    label = jax.vmap(lambda b: features_lib._chain_labels(b, n))(position.board)
    x = states._x
    return Lean(
        board=position.board,
        label=label,
        chains=jax.vmap(lambda b, lab: lean_chains.of_board(b, lab, n))(position.board, label),
        ko=position.ko,
        turns_since=position.turns_since,
        black_to_move=position.black_to_move,
        passes=x.consecutive_pass_count.astype(jnp.int32),
        steps=x.step_count.astype(jnp.int32),
        over=states.terminated | states.truncated,
    )


def step(state: Lean, action: jax.Array, n: int, max_steps: int) -> Lean:
    """Plays `action` [B] (a point, legal for the player to move, or N² to pass) in every game not over."""
    p = n * n

    action = jnp.where(state.over, p, action)  # a game over plays nothing (and captures nothing)
    played = action < p
    board, label, ko, chains = lean_chains.play(state.board, state.label, state.chains, action, n)

    def turns_since(board, turns, played, x):
        turns = jnp.where(board != 0, jnp.minimum(turns + 1, 8), 0).astype(jnp.int8)
        return jnp.where(played, turns.at[x].set(1), turns)

    turns = jax.vmap(turns_since)(board, state.turns_since, played, jnp.minimum(action, p - 1))
    board = -board
    moving = ~state.over
    passes = jnp.where(action >= p, state.passes + 1, 0)
    steps = state.steps + 1
    keep = functools.partial(where_rows, moving)
    return Lean(
        board=keep(board, state.board),
        label=keep(label, state.label),
        chains=jax.tree.map(keep, chains, state.chains),
        ko=keep(ko, state.ko),
        turns_since=keep(turns, state.turns_since),
        black_to_move=keep(~state.black_to_move, state.black_to_move),
        passes=keep(passes, state.passes),
        steps=keep(steps, state.steps),
        over=state.over | (moving & ((passes >= 2) | (steps >= max_steps))),
    )


def black_wins(state: Lean, n: int, komi: float) -> jax.Array:
    """[B] bool: Black's Tromp–Taylor area minus `komi` beats White's (pgx's scorer on the board as it stands)."""
    black_board = jnp.where(state.black_to_move[:, None], state.board, -state.board).astype(jnp.int32)
    scores = jax.vmap(lambda b: pgx_go._count_scores(pgx_go.GameState(board=b), n))(black_board)  # [B, 2]
    return scores[:, 0] - komi > scores[:, 1]


def encode(state: Lean) -> tuple[rollout_lib.Encoded, jax.Array]:
    """p_π's raw features of every point, from the carried chain labels (no chains found again), and [B, P] each
    point's being the player to move's own eye (the sensibleness plane's rule)."""
    n = state.position.size

    def one(board, turns, ko, label, chains):
        encoded, moves, _ = rollout_lib.encode_parts(board, turns, ko, n, label=label, lean=True, chains=chains)
        return encoded, moves["own_eye"]

    return jax.vmap(one)(state.board, state.turns_since, state.ko, state.label, state.chains)


def play(
    policy: rollout_lib.RolloutPolicy,
    states: pgx.State,
    key: jax.Array,
    env: pgx.Env,
    max_moves: int | jax.Array = 0,
    plies_per_loop: int = 1,
) -> tuple[jax.Array, Lean]:
    """(z [B] float32, the final states): each pgx Go state played to its end by p_π (sampled over the sensible
    points: legal, not an own eye; a pass when none is left) and scored by `env`'s komi, z = +1 if the player to move
    in the given state won. A state already over gives pgx's result. With `max_moves` > 0 a game still going after
    that many moves is scored as it stands. The key is consumed.

    `plies_per_loop` k: each iteration of the rollout's while loop plays k plies (unrolled), so the loop's fixed cost
    per iteration (its condition, read back by the host on a GPU) is paid once per k plies; a game that ends within
    them stays as it ended. The same games and results for every k (one key split per ply either way)."""
    n = int(round(states._x.board.shape[-1] ** 0.5))
    game = env._game  # type: ignore[attr-defined]
    batch = jnp.arange(states.current_player.shape[0])
    start = from_states(states)
    capped = not (isinstance(max_moves, int) and max_moves == 0)

    def running(carry):
        s, _, t = carry
        return (~s.over).any() & (((max_moves == 0) | (t < max_moves)) if capped else True)

    def ply(s, key):
        encoded, own_eye = encode(s)
        scores = rollout_lib._scores(policy.weights, rollout_lib.indices(policy, encoded))  # [B, N²], -inf: illegal
        sensible = jnp.isfinite(scores) & ~own_eye
        point = rollout_lib.sample(key, jnp.where(sensible, scores, -jnp.inf))
        action = jnp.where(sensible.any(-1), point, n * n).astype(jnp.int32)
        return step(s, action, n, game.max_termination_steps)

    def body(carry):
        s, key, t = carry
        for _ in range(plies_per_loop):
            key, sample_key = jax.random.split(key)
            moved = ply(s, sample_key)
            if capped and plies_per_loop > 1:  # past the cap within these plies: the games stay as they stood
                within = (max_moves == 0) | (t < max_moves)
                moved = jax.tree.map(functools.partial(jnp.where, within), moved, s)
            s, t = moved, t + 1
        return s, key, t

    end, _, _ = jax.lax.while_loop(running, body, (start, key, jnp.int32(0)))
    won = black_wins(end, n, game.komi) == start.black_to_move
    z = jnp.where(won, 1.0, -1.0)
    return jnp.where(states.terminated, states.rewards[batch, states.current_player], z), end

"""Self-play resignation with an automatically calibrated threshold v_resign (AlphaGo Zero, Silver et al., Nature
2017, Methods, "Self-play").

The rule [001]: the player to move resigns when both the root value and the best child's value fall below v_resign,
from its own point of view. Here "best child" is the most visited root action (the move greedy play would make) and
its value is the search's Q(s, a) for the mover; so the rule fires when `max(root value, Q(best child)) < v_resign`.

Calibration [001]: resignation is disabled in a fixed fraction of games (paper: 10%, drawn for each game when it
starts), which are played to the end. In those games we record, for the v_resign in force and for every candidate
threshold of `GRID`, the first player for whom the rule fired — the player who WOULD have resigned there, had
resignation been on. When such a game ends, it is a false positive if that player did not lose (won or drew).

    false-positive rate = false positives / played-out games in which the rule fired

The papers do not define the denominator; this is "the fraction of resignations that were wrong" (the games that
"could have been won if AlphaGo had not resigned", out of those it would have resigned). After every
`calibration_games` played-out games, v_resign is re-set to the largest threshold of GRID whose measured rate is at
most the target (paper: 5%); a threshold at which no played-out game would have resigned has rate 0. GRID's lowest
value, −1, never fires (values are ≥ −1): it is resignation switched off in effect. Thresholds ≥ 0 (resigning an
even or better position) are not candidates. The initial v_resign is NOT IN THE PAPERS (config.v_resign_init).

A resigned game ends like a terminal one: its positions get z from the result "the resigning player lost"
(`resign_rewards`), through the same replay.resolve call as a game the rules ended.

Everything here is pure and batched over games `[B]`; the jitted iteration calls it (selfplay.py, iteration.py).
"""

import jax
import jax.numpy as jnp
import mctx
from flax import struct

from az_jax.core.rows import where_rows

# Candidate thresholds for calibration: −1.00, −0.95, …, −0.05 (20 values). The grid is a choice: NOT IN THE PAPERS.
GRID = tuple(round(-1.0 + 0.05 * k, 2) for k in range(20))
NONE = -1  # "no player": the rule has not fired in this game


@struct.dataclass
class ResignGames:
    """Per-game resignation bookkeeping, carried with the games in progress (sharded like them)."""

    allowed: jax.Array  # [B] bool: resignation on in this game (drawn when the game starts)
    first: jax.Array  # [B] int32 pgx id of the first player for whom the rule fired at the v_resign in force
    first_grid: jax.Array  # [B, K] int32 the same for each threshold of GRID (NONE: not fired)


@struct.dataclass
class ResignState:
    """The threshold and the counts of played-out games since it was last set (replicated over devices)."""

    v_resign: jax.Array  # [] float32 the threshold in force
    games: jax.Array  # [] int32 played-out games finished since the last calibration
    would: jax.Array  # [] int32 … of which the rule fired at the v_resign in force
    false_pos: jax.Array  # [] int32 … and the player it fired for did not lose
    grid_would: jax.Array  # [K] int32 the same two counts for each threshold of GRID
    grid_false_pos: jax.Array  # [K] int32


def init_state(v_resign: float) -> ResignState:
    zeros = jnp.zeros((len(GRID),), jnp.int32)
    return ResignState(
        v_resign=jnp.float32(v_resign),
        games=jnp.int32(0),
        would=jnp.int32(0),
        false_pos=jnp.int32(0),
        grid_would=zeros,
        grid_false_pos=zeros,
    )


def init_games(rng_key: jax.Array, num_games: int, disabled_fraction: float) -> ResignGames:
    """Bookkeeping for `num_games` new games; each has resignation disabled with probability `disabled_fraction`.
    The key is consumed."""
    return ResignGames(
        allowed=jax.random.uniform(rng_key, (num_games,)) >= disabled_fraction,
        first=jnp.full((num_games,), NONE, jnp.int32),
        first_grid=jnp.full((num_games, len(GRID)), NONE, jnp.int32),
    )


def restart(games: ResignGames, ended: jax.Array, rng_key: jax.Array, disabled_fraction: float) -> ResignGames:
    """Fresh bookkeeping for the slots whose game ended ([B] bool); the others are kept. The key is consumed."""
    fresh = init_games(rng_key, ended.shape[0], disabled_fraction)
    return where_rows(ended, fresh, games)


def resign_value(output: mctx.PolicyOutput, legal: jax.Array) -> jax.Array:
    """max(root value, Q of the most visited legal root action) for the player to move, [B]: the rule fires when
    this is below v_resign (both values below it)."""
    summary = output.search_tree.summary()
    best = jnp.argmax(jnp.where(legal, summary.visit_counts, -1), axis=-1)  # [B]
    best_q = jnp.take_along_axis(summary.qvalues, best[:, None], axis=-1)[:, 0]  # [B]
    return jnp.maximum(summary.value, best_q)


def observe(
    games: ResignGames, value: jax.Array, mover: jax.Array, v_resign: jax.Array
) -> tuple[ResignGames, jax.Array]:
    """One ply of every game: `value` [B] from `resign_value`, `mover` [B] pgx ids of the players to move. Records
    the first firing of the rule for the threshold in force and for each of GRID; returns the updated bookkeeping and
    resign [B] bool: the mover resigns now (the rule fired in a game where resignation is on)."""
    fires = value < v_resign  # [B]
    fires_grid = value[:, None] < jnp.asarray(GRID, value.dtype)[None, :]  # [B, K]
    first = jnp.where((games.first == NONE) & fires, mover, games.first)
    first_grid = jnp.where((games.first_grid == NONE) & fires_grid, mover[:, None], games.first_grid)
    return games.replace(first=first, first_grid=first_grid), fires & games.allowed  # type: ignore[attr-defined]


def resign_rewards(mover: jax.Array) -> jax.Array:
    """[B, 2] final rewards per pgx player id when `mover` [B] resigns: −1 for it, +1 for its opponent."""
    return jnp.where(jnp.arange(2)[None, :] == mover[:, None], -1.0, 1.0).astype(jnp.float32)


def outcome_counts(games: ResignGames, ended: jax.Array, rewards: jax.Array) -> dict:
    """Counts over the played-out games (resignation disabled) that ended this ply: `ended` [B] bool, `rewards`
    [B, 2] final rewards per pgx id. A game where the rule fired for player p is a false positive when p did not
    lose (rewards[p] >= 0). Returns {games, would, false_pos: [] int32, grid_would, grid_false_pos: [K] int32}."""
    played = ended & ~games.allowed  # [B]
    own = lambda p: jnp.take_along_axis(rewards, jnp.maximum(p, 0)[:, None], axis=1)[:, 0]  # [B] p's reward
    would = played & (games.first != NONE)
    wrong = would & (own(games.first) >= 0)
    grid_would = played[:, None] & (games.first_grid != NONE)  # [B, K]
    grid_own = jnp.take_along_axis(rewards, jnp.maximum(games.first_grid, 0), axis=1)  # [B, K]
    grid_wrong = grid_would & (grid_own >= 0)
    count = lambda x, axis=None: x.sum(axis=axis, dtype=jnp.int32)
    return {
        "games": count(played),
        "would": count(would),
        "false_pos": count(wrong),
        "grid_would": count(grid_would, 0),
        "grid_false_pos": count(grid_wrong, 0),
    }


def false_positive_rate(false_pos: jax.Array, would: jax.Array) -> jax.Array:
    """false_pos / would, and 0 where no played-out game would have resigned (elementwise)."""
    return jnp.where(would > 0, false_pos / jnp.maximum(would, 1), 0.0).astype(jnp.float32)


def calibrate(grid_false_pos: jax.Array, grid_would: jax.Array, target: float) -> jax.Array:
    """The largest threshold of GRID whose false-positive rate is at most `target` ([] float32). GRID[0] = −1 never
    fires, so it always qualifies."""
    ok = false_positive_rate(grid_false_pos, grid_would) <= target  # [K]
    grid = jnp.asarray(GRID, jnp.float32)
    return jnp.max(jnp.where(ok, grid, grid[0]))


def update(state: ResignState, counts: dict, *, target: float, calibration_games: int) -> tuple[ResignState, dict]:
    """Adds one iteration's `counts` (summed over devices) to the window; once the window holds `calibration_games`
    played-out games, re-sets v_resign (`calibrate`) and empties it. Returns the new state and its metrics."""
    total = jax.tree.map(lambda a, b: a + b, {k: getattr(state, k) for k in counts}, counts)
    recalibrate = total["games"] >= calibration_games
    v_resign = jnp.where(recalibrate, calibrate(total["grid_false_pos"], total["grid_would"], target), state.v_resign)
    metrics = {
        "resign/false_positive_rate": false_positive_rate(total["false_pos"], total["would"]),
        "resign/played_out_games": total["games"],
        "resign/would_resign_games": total["would"],
        "resign/false_positives": total["false_pos"],
        "resign/recalibrated": recalibrate.astype(jnp.int32),
        "resign/v_resign": v_resign,
    }
    kept = jax.tree.map(lambda x: jnp.where(recalibrate, jnp.zeros_like(x), x), total)
    return state.replace(v_resign=v_resign, **kept), metrics  # type: ignore[attr-defined]

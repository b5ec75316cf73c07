"""The value network's data set (Silver et al., Nature 2016, Methods, "Reinforcement learning of value networks"):
one position per self-play game, so that successive positions of a game, strongly correlated and sharing one
outcome, are not all in the data (trained on every position of complete KGS games the value network over-fits: MSE
0.37 held out against 0.19 trained; on one position per game, 0.234 against 0.226).

Each game: U ~ unif{1, U_max}; moves t = 1 … U−1 sampled from the SL policy p_σ; move a_U uniformly at random among
the legal points; moves t = U+1 … T sampled from the RL policy p_ρ until the game ends; the game is scored and only
(s_{U+1}, z_{U+1}) is kept, z = ±1 for the player to move at s_{U+1}.

    games = generate((sl_config, sl_params), (rl_config, rl_params), 256, key, 9)   # one compiled while_loop
    report = build(path, sl, rl, 9, games_total=100_000, batch=256)                   # resumable, appended to
    train, test = value_store.load_split(path)                                        # ValuePositions
    states = replay_states(train.moves[:64], 9)       # pgx states of s_{U+1} again (rollouts, Fig. 2b)

`sl` and `rl` are (config, params) pairs as `supervised.restore_params` (p_σ) and the RL stage's `restore_params`
(p_ρ) return them: only the config's `layers`, `filters` and `planes` are read. Nothing stops passing the same p_σ
twice while no p_ρ exists.

Choices where the paper is silent, or which the scale forces:
* U_max: the paper's 450 is for 19×19 (~1.25 N²); `default_u_max(N)` scales it by the number of points,
  round(450 · N² / 361): 101 on 9×9.
* A game that ends before s_{U+1} exists as a live position (pgx ends it by two passes, a positional-superko repeat
  or its 2 N² move cap within the first U moves, or the random move a_U itself ends it) is redrawn: the slot starts
  a new game with a new U, up to `max_attempts` games per slot (then the slot gives no position; never seen with
  the default 16). Redrawing keeps one position per accepted game and draws the same distribution as dropping
  such games would (rejection sampling); U's distribution is then unif{1, U_max} conditioned on the game lasting
  U + 1 positions, so a 9×9 data set holds fewer late positions than U_max suggests. Measured with the 9×9 p_σ of
  `az-jax alphago sl` (k = 32, 8 layers) playing both parts: games last 82 moves (median; 73 to 103 for 5 % to
  95 %), so about 18 % of the draws of U are redrawn and the mean U of the data is 42 rather than 51. A redrawn slot
  lengthens its batch's loop (each batch runs until its slowest slot is done).
* Moves of p_σ and p_ρ are sampled (temperature 1) over the sensible points only (pgx-legal, not filling an own eye:
  `policy_player.sensible_moves`), with a pass when none is left, as the raw policy players do; the networks have no
  pass output. The random move a_U is uniform over every pgx-legal point (eye-filling ones included; the paper
  draws from all legal moves), a pass only when no point is legal. pgx's legal points exclude the simple-ko point
  but not a positional-superko repeat; a superko move by p_ρ ends the game as pgx scores it (the mover loses).
* z comes from pgx: Tromp–Taylor area scoring with komi 7.5 (`pgx.make("go_9x9")`), so never a draw.
* The held-out part is one game in `test_every` (20: 5 %) by game index (game g is held out when g % 20 == 19), so
  extending a data set never moves a game between the parts.
* Reproducibility: game g's randomness is `fold_in(key(seed), g)`, whatever the batch or the number of devices;
  a data set built in several calls equals one built in one (up to the float rounding of batched convolutions).

Program shape: `generate` is `devices.sharded` over the mesh's devices (each its share of the games); on each device
one `lax.while_loop` plays all its games a ply at a time until every game is over, each game in its own phase (p_σ,
the random move, p_ρ); each network runs only on plies where some game needs it (`lax.cond`). pgx's rules object
(`Game.step`, `legal_action_mask`, `is_terminal`, `rewards`) is used directly, without the env's per-step
observation and scoring.
"""

from __future__ import annotations

import functools
import hashlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, cast

import jax
import jax.numpy as jnp
import numpy as np
import pgx
from flax import struct
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P
from pgx.go import State as GoState

from az_jax.alphago import value_store
from az_jax.alphago.networks import PolicyNetwork
from az_jax.alphago.policy_player import sensible_moves
from az_jax.alphago.position import Position, from_pgx
from az_jax.alphago.value_store import FORMAT, TEST_EVERY, ValueDataError, ValuePositions
from az_jax.core import devices
from az_jax.core.rows import where_rows

PAPER_U_MAX = 450  # U ~ unif{1, 450} on 19×19
MAX_ATTEMPTS = 16  # games started per slot before it gives up


class PolicyShape(Protocol):
    """What is read of a policy network's config (supervised.SLConfig, the RL stage's config)."""

    layers: int
    filters: int
    planes: int


Policy = tuple[Any, Any]  # (config with layers/filters/planes, params): what restore_params returns, less the step


def default_u_max(size: int) -> int:
    """The paper's U_max = 450 on 19×19 scaled by the number of points: round(450 · N² / 361) (101 on 9×9)."""
    return round(PAPER_U_MAX * size * size / 361)


def _shape(config: PolicyShape) -> tuple[int, int, int]:
    return int(config.layers), int(config.filters), int(config.planes)


@functools.cache
def _game(size: int):
    """pgx's Go rules object (komi 7.5, a cap of 2 N² moves), used without the env's observation and rewards."""
    return pgx.make(f"go_{size}x{size}")._game  # type: ignore[arg-type, attr-defined]


# ---------------------------------------------------------------------------------------------------------------------
# generation


@struct.dataclass
class Games:
    """One batch of generated games (device arrays; B games)."""

    position: Position  # [B, ...] s_{U+1}: the position after the random move a_U
    outcome: jax.Array  # [B] int8 z: +1 if the player to move at s_{U+1} won the game, -1 if they lost
    u: jax.Array  # [B] int32 U: moves played before s_{U+1} (a_U, the U-th, was the random one)
    moves: jax.Array  # [B, 2 N²] int16: every move of the accepted game (pgx actions, N² = pass), -1 after its end
    attempts: jax.Array  # [B] int32: games started in the slot (1 + the games redrawn because they ended too soon)
    valid: jax.Array  # [B] bool: the slot holds an accepted game (False only after max_attempts redraws)


@functools.cache
def _generator(size: int, sl_shape: tuple[int, int, int], rl_shape: tuple[int, int, int], mesh: Mesh) -> Callable:
    """jit(shard_map((sl_params, rl_params, key, settings, game_index [B]) -> Games)); `settings` (U's low and high
    bounds, the temperature, max_attempts) are arguments, not constants, so they share one compiled program."""
    game = _game(size)
    points = size * size
    length = game.max_termination_steps  # pgx ends every game by this many moves
    nets = [(PolicyNetwork(layers=s[0], filters=s[1]), s[2]) for s in (sl_shape, rl_shape)]

    def logits_of(index: int, params, planes: jax.Array, wanted: jax.Array) -> jax.Array:
        """[b, N²] logits of network `index` (0: p_σ, 1: p_ρ), computed only when some game of the device wants them."""
        net, num_planes = nets[index]
        return jax.lax.cond(
            wanted.any(),
            lambda: cast(jax.Array, net.apply({"params": params}, planes[..., :num_planes])).astype(jnp.float32),
            lambda: jnp.zeros(planes.shape[:1] + (points,), jnp.float32),
        )

    def play(sl_params, rl_params, key: jax.Array, settings: dict, game_index: jax.Array) -> Games:
        u_lo, u_hi, temperature, max_attempts = (settings[k] for k in ("u_lo", "u_hi", "temperature", "max_attempts"))
        b = game_index.shape[0]
        rows = jnp.arange(b)
        game_keys = jax.vmap(jax.random.fold_in, (None, 0))(key, game_index)
        start = jax.tree.map(lambda leaf: jnp.broadcast_to(leaf, (b, *leaf.shape)), game.init())
        carry = {
            "t": jnp.int32(0),  # iterations so far: game g's keys at iteration t are fold_in(fold_in(key, g), t)
            "x": start,
            "u": jnp.zeros(b, jnp.int32),
            "restart": jnp.ones(b, bool),  # (re)start the slot's game at the next iteration, drawing a new U
            "attempts": jnp.zeros(b, jnp.int32),
            "done": jnp.zeros(b, bool),
            "valid": jnp.zeros(b, bool),
            "z": jnp.zeros(b, jnp.int8),
            "moves": jnp.full((b, length), -1, jnp.int16),
            "captured": from_pgx(GoState(_x=start)),  # type: ignore[call-arg]
        }

        def body(c: dict) -> dict:
            keys = jax.vmap(jax.random.fold_in, (0, None))(game_keys, c["t"])
            keys = jax.vmap(lambda k: jax.random.split(k, 3))(keys)  # [b, 3]: U, policy sample, random move
            restart = c["restart"]
            x = where_rows(restart, start, c["x"])
            new_u = jax.vmap(lambda k: jax.random.randint(k, (), u_lo, u_hi + 1))(keys[:, 0])
            u = jnp.where(restart, new_u, c["u"])
            attempts = c["attempts"] + restart
            moves = jnp.where(restart[:, None], jnp.int16(-1), c["moves"])
            active = ~c["done"]

            mask = jax.vmap(game.legal_action_mask)(x)  # [b, N² + 1]
            planes, sensible = sensible_moves(GoState(_x=x, legal_action_mask=mask))  # type: ignore[call-arg]
            ply = x.step_count  # moves played so far: the next is move ply + 1
            sigma = active & (ply < u - 1)  # moves 1 … U−1
            random = active & (ply == u - 1)  # move U
            rho = active & (ply >= u)  # moves U+1 … T
            logits = jnp.where(
                sigma[:, None], logits_of(0, sl_params, planes, sigma), logits_of(1, rl_params, planes, rho)
            )
            point = jax.vmap(jax.random.categorical)(keys[:, 1], jnp.where(sensible, logits / temperature, -jnp.inf))
            policy_move = jnp.where(sensible.any(-1), point, points)
            legal = mask[:, :points]
            random_point = jax.vmap(jax.random.categorical)(keys[:, 2], jnp.where(legal, 0.0, -jnp.inf))
            random_move = jnp.where(legal.any(-1), random_point, points)
            action = jnp.where(random, random_move, policy_move).astype(jnp.int32)

            x = where_rows(active, jax.vmap(game.step)(x, action), x)
            column = jnp.minimum(ply, length - 1)
            moves = moves.at[rows, column].set(jnp.where(active, action, moves[rows, column]).astype(jnp.int16))
            terminal = jax.vmap(game.is_terminal)(x)
            captured = where_rows(random, from_pgx(GoState(_x=x)), c["captured"])  # type: ignore[call-arg]
            too_soon = active & (ply < u) & terminal  # over before s_{U+1} exists as a live position
            finished = active & (ply >= u) & terminal
            rewards = jax.lax.cond(
                finished.any(), lambda: jax.vmap(game.rewards)(x), lambda: jnp.zeros((b, 2), jnp.float32)
            )  # [b, 2] by colour: Black, White
            z = jnp.take_along_axis(rewards, (u % 2)[:, None], axis=1)[:, 0]  # s_{U+1}'s mover: colour U mod 2
            return {
                "t": c["t"] + 1,
                "x": x,
                "u": u,
                "restart": too_soon & (attempts < max_attempts),
                "attempts": attempts,
                "done": c["done"] | finished | (too_soon & (attempts >= max_attempts)),
                "valid": c["valid"] | finished,
                "z": jnp.where(finished, z.astype(jnp.int8), c["z"]),
                "moves": moves,
                "captured": captured,
            }

        c = jax.lax.while_loop(lambda c: ~jnp.all(c["done"]), body, carry)
        return Games(
            position=c["captured"],
            outcome=c["z"],
            u=c["u"],
            moves=c["moves"],
            attempts=c["attempts"],
            valid=c["valid"],
        )

    batch = P(devices.DEVICE_AXIS)
    return devices.sharded(play, mesh, in_specs=(P(), P(), P(), P(), batch), out_specs=batch)


def _check_range(u_range: tuple[int, int] | None, size: int) -> tuple[int, int]:
    lo, hi = u_range if u_range is not None else (1, default_u_max(size))
    cap = 2 * size * size  # pgx's move cap: s_{U+1} must come before it
    if not (1 <= lo <= hi < cap):
        raise ValueError(f"u_range must satisfy 1 <= low <= high < {cap}, got ({lo}, {hi})")
    return int(lo), int(hi)


def generate(
    sl: Policy,
    rl: Policy,
    games: int,
    key: jax.Array,
    size: int,
    *,
    u_range: tuple[int, int] | None = None,
    temperature: float = 1.0,
    max_attempts: int = MAX_ATTEMPTS,
    first_game: int = 0,
    mesh: Mesh | None = None,
) -> Games:
    """Plays `games` games (indices first_game … first_game + games − 1) on device and returns each one's s_{U+1},
    z and U (see the module docstring). `sl`, `rl`: (config, params) of p_σ and p_ρ; u_range: U's bounds, both
    included (default (1, default_u_max(size))); `games` must be a multiple of the mesh's devices."""
    mesh = mesh or devices.make_mesh()
    lo, hi = _check_range(u_range, size)
    for name, (config, _) in (("sl", sl), ("rl", rl)):
        if getattr(config, "size", size) != size:
            raise ValueError(f"the {name} policy is for {config.size}x{config.size}, not {size}x{size}")
    if games < 1 or games % mesh.size:
        raise ValueError(f"games must be a positive multiple of the {mesh.size} devices, got {games}")
    if not temperature > 0 or max_attempts < 1:
        raise ValueError(f"temperature must be > 0 and max_attempts >= 1, got {temperature}, {max_attempts}")
    settings = {
        "u_lo": jnp.int32(lo),
        "u_hi": jnp.int32(hi),
        "temperature": jnp.float32(temperature),
        "max_attempts": jnp.int32(max_attempts),
    }
    index = jax.device_put(
        jnp.arange(first_game, first_game + games, dtype=jnp.int32), devices.shardings(mesh, P(devices.DEVICE_AXIS))
    )
    # the weights as restored may sit on different devices (a checkpoint of one device, one of the mesh): replicate
    sl_params, rl_params = jax.device_put((sl[1], rl[1]), devices.shardings(mesh, P()))
    return _generator(size, _shape(sl[0]), _shape(rl[0]), mesh)(sl_params, rl_params, key, settings, index)


# ---------------------------------------------------------------------------------------------------------------------
# replaying stored moves (rollouts from s_{U+1} need the full pgx state: superko history, chain ids)


def env_state(x, player_order: jax.Array) -> GoState:
    """The pgx env state [B] of rules states x [B] (pgx.go.GameState) and player orders [B, 2], as pgx's env would
    hold it after the move that led to x: legal-action mask (all true once over), terminated, the result (rewards by
    player, nonzero once over), observation. Fields a consumer never reads cost nothing under jit."""
    size = round(x.board.shape[-1] ** 0.5)
    game = _game(size)
    terminated = jax.vmap(game.is_terminal)(x)
    return GoState(  # type: ignore[call-arg]
        current_player=jnp.take_along_axis(player_order, x.color[:, None], axis=1)[:, 0],
        rewards=jnp.take_along_axis(jax.vmap(game.rewards)(x), player_order, axis=1),  # by player, as the env's
        terminated=terminated,
        truncated=jnp.zeros_like(terminated),
        legal_action_mask=jnp.where(terminated[:, None], True, jax.vmap(game.legal_action_mask)(x)),
        observation=jax.vmap(game.observe)(x, x.color),  # the env's: seen by the player to move
        _step_count=x.step_count,
        _player_order=player_order,
        _x=x,
    )


@functools.cache
def _replayer(size: int):
    game = _game(size)
    points = size * size

    @jax.jit
    def replay(moves: jax.Array) -> tuple[GoState, jax.Array]:  # [M, L] -> (pgx.State [M], [M] bool all legal)
        m = moves.shape[0]
        start = jax.tree.map(lambda leaf: jnp.broadcast_to(leaf, (m, *leaf.shape)), game.init())

        def ply(carry, action):  # action [M]
            x, ok = carry
            wanted = action >= 0
            a = jnp.clip(action, 0, points)
            legal = jax.vmap(game.legal_action_mask)(x)[jnp.arange(m), a] & ~jax.vmap(game.is_terminal)(x)
            x = where_rows(wanted, jax.vmap(game.step)(x, a), x)
            return (x, ok & (legal | ~wanted)), None

        (x, ok), _ = jax.lax.scan(ply, (start, jnp.ones(m, bool)), moves.T.astype(jnp.int32))
        order = jnp.broadcast_to(jnp.arange(2, dtype=jnp.int32), (m, 2))
        return env_state(x, order), ok

    return replay


def replay_states(moves: np.ndarray | jax.Array, size: int) -> pgx.State:
    """pgx env states [M] after each row's moves ([M, L] pgx actions, -1 for none): s_{U+1} of stored games, exact
    (chains, ko, superko history), for rollouts or any pgx player. Player 0 is Black (`current_player` is the colour
    to move). ValueError if a row holds a move pgx does not allow (an illegal point, a move after the game's end)."""
    state, ok = _replayer(size)(jnp.asarray(moves))
    bad = np.flatnonzero(~np.asarray(ok))
    if bad.size:
        raise ValueError(f"{bad.size} of {len(ok)} move lists hold a move pgx does not allow (row {bad[0]} first)")
    return state


# ---------------------------------------------------------------------------------------------------------------------
# the resumable build (the files: value_store.py)


def to_host(games: Games, first_game: int, u_max: int) -> ValuePositions:
    """The accepted games of a batch as ValuePositions (game indices from `first_game`; moves cut to U_max)."""
    g = jax.device_get(games)
    keep = np.flatnonzero(np.asarray(g.valid))
    u = np.asarray(g.u, np.int32)[keep]
    prefix = np.arange(u_max) < u[:, None]  # a_1 … a_U; p_ρ's moves after them are not kept
    return ValuePositions(
        position=jax.tree.map(lambda x: np.asarray(x)[keep], g.position),
        outcome=np.asarray(g.outcome, np.int8)[keep],
        u=u,
        game=(first_game + keep).astype(np.int32),
        moves=np.where(prefix, np.asarray(g.moves, np.int16)[keep, :u_max], np.int16(-1)),
        attempts=np.asarray(g.attempts, np.int32)[keep],
    )


def fingerprint(policy: Policy) -> str:
    """A short hash of a policy's network shape and weights: a data set is extended only with the same networks."""
    config, params = policy
    h = hashlib.sha256(repr(_shape(config)).encode())
    for path, leaf in jax.tree_util.tree_flatten_with_path(jax.device_get(params))[0]:
        a = np.ascontiguousarray(leaf)
        h.update(f"{jax.tree_util.keystr(path)}:{a.dtype}:{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def build(
    out_path: str | os.PathLike,
    sl: Policy,
    rl: Policy,
    size: int,
    games_total: int,
    *,
    batch: int = 256,
    seed: int = 0,
    u_range: tuple[int, int] | None = None,
    temperature: float = 1.0,
    test_every: int = TEST_EVERY,
    max_attempts: int = MAX_ATTEMPTS,
    mesh: Mesh | None = None,
    overwrite: bool = False,
    save_every_seconds: float = 60.0,
    log: Callable[[dict], None] | None = None,
) -> dict:
    """Generates games in batches of `batch` until `out_path` holds at least `games_total` games (whole batches:
    the count is rounded up to a multiple of `batch`), appending to what `out_path` already holds: a directory (two
    column stores, train and test), to which the games since the last save are appended at least every
    `save_every_seconds` and at the end (nothing written is rewritten; memory holds one save's games), or, for a
    path ending in .npz, one file rewritten whole (temporary file, rename) at each save. An interrupted build
    resumes from its last save. A set built with other settings or other networks (seed, U range, temperature,
    test_every, max_attempts, the two fingerprints) gives ValueDataError unless `overwrite`; `batch` may change
    between calls. Returns a report: positions (train/test), games played, redraws, slots given up, positions per
    second of this call, mean U, seconds, path."""
    lo, hi = _check_range(u_range, size)
    if games_total < 1 or batch < 1 or test_every < 2:
        raise ValueError(
            f"games_total and batch must be >= 1 and test_every >= 2, got {games_total}, {batch}, {test_every}"
        )
    meta = {
        "format": FORMAT,
        "size": size,
        "seed": seed,
        "u_range": [lo, hi],
        "temperature": float(temperature),
        "test_every": test_every,
        "max_attempts": max_attempts,
        "sl": fingerprint(sl),
        "rl": fingerprint(rl),
    }
    target = Path(out_path)
    directory = target.suffix != ".npz"
    parts: list[ValuePositions] = []
    games_done = 0
    if directory:
        games_done = value_store.open_directory(target, meta, overwrite)
    elif target.exists() and not overwrite:
        try:
            old_meta, old, games_done = value_store.read_file(target)
        except ValueDataError as e:
            raise ValueDataError(f"{target} exists and is not this value data set ({e}); pass overwrite") from None
        value_store.check_settings(target, meta, old_meta)
        parts.append(old)
    key = jax.random.key(seed)
    start = last_save = time.perf_counter()
    generated = 0
    while games_done < games_total:
        games = generate(
            sl, rl, batch, key, size, u_range=(lo, hi), temperature=temperature, max_attempts=max_attempts,
            first_game=games_done, mesh=mesh,
        )  # fmt: skip
        part = to_host(games, games_done, hi)
        parts.append(part)
        games_done += batch
        generated += len(part)
        now = time.perf_counter()
        if log is not None:
            log({"games": games_done, "positions": sum(len(p) for p in parts), "seconds": round(now - start, 1)})
        if now - last_save >= save_every_seconds or games_done >= games_total:
            if directory:  # only the games since the last save are written
                value_store.append_directory(target, meta, value_store.concatenate(parts), games_done)
                parts = []
            else:  # the whole set rewritten
                value_store.write_file(target, meta, value_store.concatenate(parts), games_done)
                parts = [value_store.concatenate(parts)]
            last_save = now
    seconds = time.perf_counter() - start
    if directory:
        _, train, test, _ = value_store.read_directory(target)
    else:
        train, test = value_store.split(
            value_store.concatenate(parts) if parts else value_store.read_file(target)[1], test_every
        )
    positions = len(train) + len(test)
    u_sum = float(np.sum(train.u, dtype=np.int64) + np.sum(test.u, dtype=np.int64))
    return {
        "positions": positions,
        "train_positions": len(train),
        "test_positions": len(test),
        "games": games_done,
        "redraws": int(np.sum(train.attempts - 1, dtype=np.int64) + np.sum(test.attempts - 1, dtype=np.int64)),
        "given_up": games_done - positions,
        "mean_u": round(u_sum / positions, 2) if positions else None,
        "new_positions": generated,
        "positions_per_second": round(generated / seconds, 2) if generated else None,
        "seconds": round(seconds, 1),
        "path": str(target),
    }

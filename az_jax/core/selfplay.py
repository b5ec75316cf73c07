"""The self-play move loop: B games advance one ply per step inside `lax.scan`; finished games restart in place.

Each stored position keeps observation, search policy π, legal mask and mover; its outcome z arrives when its game
ends (replay.resolve). Moves are sampled from the search policy for the first `sampling_moves` plies of each game and
chosen greedily by visit count afterwards (AlphaGo Zero, Silver et al., Nature 2017, Methods, "Self-play"; AlphaZero
keeps the AGZ cut-off of 30 by default). With `random_opening_plies` K > 0 (not in the papers) the first K plies of
each game are uniformly random legal moves instead (from the learner's first rate step on,
`random_opening_plies_after_rate_step` of them when that is set); their positions are searched and stored like any
other (their outcomes, which follow random moves, are no value targets with `mask_random_opening_values`).
With `fork_fraction` f > 0 (game forking, KataGo: Wu 2019; not in the papers) every game keeps a fork candidate: one of
its positions, uniform among them (reservoir sampling: the game's n-th position replaces the candidate with probability
1/n), after one uniformly random legal move that does not end the game. When the game ends, its slot's next game
starts, with probability f, from that candidate (its plies counted from the initial position, so temperature and
random openings stay per ply of the game) instead of the initial position.
With `resign` (AlphaGo Zero, az_jax/core/resign.py) a game also ends when its mover resigns; the resigning side loses.
With KataGo's auxiliary targets on, the final position of each game that ends is also scored for ownership and margin
(GameSpec.final_targets), which reach its positions with z.
"""

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import pgx
from flax import struct

from az_jax.core import replay as replay_lib
from az_jax.core import resign as resign_lib
from az_jax.core import search as search_lib
from az_jax.core.config import Config
from az_jax.core.rows import where_rows
from envs import get_game


@struct.dataclass
class SelfPlayState:
    env: Any  # pgx.State batched [B, ...]: the games in progress
    ply: jax.Array  # [B] int32 plies already played in each slot's current game
    episode: jax.Array  # [B] int32 games started so far in each slot (names a game together with its slot)
    resign: resign_lib.ResignGames | None = None  # [B, ...] resignation bookkeeping (None: resignation off)
    fork: Any = None  # pgx.State [B, ...] each game's fork candidate (None: forking off)
    fork_ply: jax.Array | None = None  # [B] int32 plies before the candidate's position; 0: no candidate yet
    fork_offers: jax.Array | None = None  # [B] int32 positions of the current game offered as candidates so far


@dataclasses.dataclass(frozen=True)
class SelfPlayConfig:
    """Static self-play settings, made once from a Config (hashable; closed over by the jitted iteration)."""

    search: search_lib.SearchConfig  # the search of every move, with root noise
    num_plies: int  # S: plies every game advances per call
    sampling_moves: int  # plies of each game sampled ∝ visits (τ = 1), then greedy
    random_opening_plies: int = 0  # plies of each game played uniformly at random (still searched and stored)
    # from the optimizer's step count `rate_step` on, this many instead (Config.random_opening_plies_after_rate_step);
    # 0: no change
    random_opening_plies_after_rate_step: int = 0
    rate_step: int = 0
    resign_disabled_fraction: float | None = None  # resignation on (AlphaGo Zero): the fraction of games played out
    # Playout cap randomization (KataGo, Wu 2019, §3.1): with probability `full_search_fraction` a ply is searched
    # by `search`, else by `fast_search` (fewer simulations, no root noise), and only fully searched positions are
    # trained on. None: every ply is a full search.
    fast_search: search_lib.SearchConfig | None = None
    full_search_fraction: float = 1.0
    # KataGo's auxiliary targets (Wu 2019, "Auxiliary Ownership and Score Targets"): the game's GameSpec.final_targets,
    # applied to every game that ends; None: off
    final_targets: Callable | None = None
    # Each ply searches the device's games in groups of this many, one after the other (Config.search_batch_size): a
    # search tree only lives during its group's search, so the trees' memory is set by it. 0: all games in one search.
    search_batch_size: int = 0
    fork_fraction: float = 0.0  # the fraction of new games started from their slot's fork candidate (0: off)

    @classmethod
    def from_config(cls, config: Config) -> "SelfPlayConfig":
        search = search_lib.SearchConfig.for_selfplay(config)
        capped = config.full_search_fraction < 1.0
        return cls(
            search=search,
            num_plies=config.selfplay_steps,
            sampling_moves=config.sampling_moves,
            random_opening_plies=config.random_opening_plies,
            random_opening_plies_after_rate_step=config.random_opening_plies_after_rate_step,
            rate_step=config.lr_boundaries[0] if config.lr_boundaries else 0,
            resign_disabled_fraction=config.resign_disabled_fraction if config.resign else None,
            fast_search=dataclasses.replace(search, num_simulations=config.fast_simulations, dirichlet_fraction=0.0)
            if capped
            else None,
            full_search_fraction=config.full_search_fraction,
            final_targets=get_game(config.game).final_targets if config.aux_targets else None,
            search_batch_size=config.search_batch_size,
            fork_fraction=config.fork_fraction,
        )


def init(
    env: pgx.Env,
    rng_key: jax.Array,
    num_games: int,
    resign_disabled_fraction: float | None = None,
    forking: bool = False,
) -> SelfPlayState:
    """Starts `num_games` fresh games (with resignation bookkeeping unless `resign_disabled_fraction` is None, with
    room for fork candidates if `forking`); the key is consumed."""
    resign = None
    if resign_disabled_fraction is not None:
        rng_key, resign_key = jax.random.split(rng_key)
        resign = resign_lib.init_games(resign_key, num_games, resign_disabled_fraction)
    games = jax.vmap(env.init)(jax.random.split(rng_key, num_games))
    return SelfPlayState(
        env=games,
        ply=jnp.zeros(num_games, jnp.int32),
        episode=jnp.zeros(num_games, jnp.int32),
        resign=resign,
        fork=games if forking else None,  # placeholders until each game's first ply: fork_ply 0 marks none
        fork_ply=jnp.zeros(num_games, jnp.int32) if forking else None,
        fork_offers=jnp.zeros(num_games, jnp.int32) if forking else None,
    )


def offer_forks(env: pgx.Env, state: SelfPlayState, rng_key: jax.Array) -> SelfPlayState:
    """Offers each game's current position (ply t, the game's n-th position) as its fork candidate: that position
    after one uniformly random legal move replaces the candidate with probability 1/n, unless the move ends the game
    (reservoir sampling: the candidate is uniform among the game's positions so far). Returns `state` with the new
    candidates [B, ...], their plies t + 1 [B] and the offer counts n [B]; the key is consumed."""
    assert state.fork_offers is not None and state.fork_ply is not None  # init(forking=True)
    move_key, keep_key = jax.random.split(rng_key)
    games = state.env
    move = jax.random.categorical(move_key, jnp.where(games.legal_action_mask, 0.0, -jnp.inf))  # [B]
    forked = jax.vmap(env.step)(games, move)
    offers = state.fork_offers + 1
    keep = jax.random.uniform(keep_key, offers.shape) * offers < 1.0  # [B] probability 1/n
    keep = keep & ~(forked.terminated | forked.truncated)
    return state.replace(  # type: ignore[attr-defined]
        fork=where_rows(keep, forked, state.fork),
        fork_ply=jnp.where(keep, state.ply + 1, state.fork_ply),
        fork_offers=offers,
    )


def search_in_chunks(
    apply_fn: search_lib.ApplyFn,
    env: pgx.Env,
    variables: dict,
    rng_key: jax.Array,
    games: pgx.State,
    search: search_lib.SearchConfig,
    chunks: int,
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array]:
    """Searches games [B, ...] in `chunks` groups of B / chunks, one after the other (`lax.map`), so only one group's
    tree is alive at a time. Returns (sampled action [B], policy target [B, A], greedy action [B], root value [B],
    resign_lib.resign_value [B]).
    With one chunk the key is the search's own (the unchunked search, bitwise); with several each group gets a key
    split from it."""

    def one(key, group):
        out = search_lib.run_search(apply_fn, env, variables, key, group, search)
        legal = search_lib.allowed_moves(group, search.eye_rule_game)
        greedy = search_lib.greedy_action(out, legal)
        value = out.search_tree.summary().value
        return out.action, out.action_weights, greedy, value, resign_lib.resign_value(out, legal)

    if chunks == 1:
        return one(rng_key, games)
    grouped = jax.tree.map(lambda x: x.reshape(chunks, x.shape[0] // chunks, *x.shape[1:]), games)
    keys = jax.random.split(rng_key, chunks)
    results = jax.lax.map(lambda xs: one(*xs), (keys, grouped))
    return jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), results)


def play(
    env: pgx.Env,
    apply_fn: search_lib.ApplyFn,
    variables: dict,
    settings: SelfPlayConfig,
    state: SelfPlayState,
    buffer: replay_lib.ReplayBuffer,
    rng_key: jax.Array,
    first_ply: jax.Array,
    v_resign: jax.Array | None = None,
    optimizer_step: jax.Array | None = None,
) -> tuple[SelfPlayState, replay_lib.ReplayBuffer, dict]:
    """Plays `settings.num_plies` plies of every game ([B] of them) and writes them to `buffer`; the key is consumed.

    `first_ply` is the global ply counter (iteration · num_plies) that places the rows in the buffer.
    Returns the new games, buffer and summed metrics (games finished, their total length, decisive results; with
    resignation also "resigned", the games resigned, and "resign_counts", resign.outcome_counts of the played-out
    games; with forking also "forked", the new games started from a fork). A forked game's length counts its plies
    from the initial position.
    `v_resign` ([] float) is the resignation threshold when `settings.resign_disabled_fraction` is not None.
    `optimizer_step` ([] int) is the learner's step count, which sets the random plies when
    `settings.random_opening_plies_after_rate_step` is on.
    """
    num_games = state.ply.shape[0]
    resigning = settings.resign_disabled_fraction is not None
    opening_plies: int | jax.Array = settings.random_opening_plies  # [] plies played at random in this call
    if settings.random_opening_plies_after_rate_step:
        assert optimizer_step is not None  # the schedule is the learner's
        opening_plies = jnp.where(
            optimizer_step >= settings.rate_step,
            settings.random_opening_plies_after_rate_step,
            settings.random_opening_plies,
        )
    random_openings = bool(settings.random_opening_plies or settings.random_opening_plies_after_rate_step)
    forking = settings.fork_fraction > 0
    assert not forking or state.fork_ply is not None  # init(forking=True)

    def step(carry, xs):
        state, buffer = carry
        ply_index, key = xs
        search_key, reset_key = jax.random.split(key)
        if resigning:
            reset_key, resign_key = jax.random.split(reset_key)
        if random_openings:
            reset_key, opening_key = jax.random.split(reset_key)
        if forking:
            reset_key, candidate_key, fork_key = jax.random.split(reset_key, 3)
            state = offer_forks(env, state, candidate_key)
        games = state.env
        legal = games.legal_action_mask

        def searched(search):
            def run(key):  # the search's results for every game; the tree itself never leaves
                chunks = num_games // settings.search_batch_size if 0 < settings.search_batch_size < num_games else 1
                return search_in_chunks(apply_fn, env, variables, key, games, search, chunks)

            return run

        if settings.fast_search is None:
            full = jnp.bool_(True)
            sampled, weights, greedy, value, resign_value = searched(settings.search)(search_key)
        else:  # one of two searches for the whole batch; their trees differ in size, so only these leave the cond
            search_key, cap_key = jax.random.split(search_key)
            full = jax.random.bernoulli(cap_key, settings.full_search_fraction)
            sampled, weights, greedy, value, resign_value = jax.lax.cond(
                full, searched(settings.search), searched(settings.fast_search), search_key
            )
        action = jnp.where(state.ply < settings.sampling_moves, sampled, greedy)  # [B]
        if random_openings:  # a uniformly random legal move in each game's first plies
            uniform = jax.random.categorical(opening_key, jnp.where(legal, 0.0, -jnp.inf))  # [B]
            action = jnp.where(state.ply < opening_plies, uniform, action)
        buffer = replay_lib.add(
            buffer,
            ply_index,
            games.observation,
            weights,
            legal,
            games.current_player,
            state.episode,
            search_value=value,
            trainable=None if settings.fast_search is None else full,
            state=games,
            # a random move follows this position (kept where the buffer keeps it: Config.mask_random_opening_values)
            value_known=state.ply >= opening_plies if random_openings else None,
        )
        mover = games.current_player
        games = jax.vmap(env.step)(games, action)
        ended = games.terminated | games.truncated  # [B]
        rewards = games.rewards  # [B, 2]
        resign_games, extra, resigned = state.resign, {}, None
        if resigning:
            # The rule is checked at every ply of every game; a game where resignation is on ends here instead of
            # playing `action`, and ends exactly like a terminal: its positions resolve with the resigner's loss.
            assert settings.fast_search is None  # Config: resign and playout cap randomization exclude each other
            assert v_resign is not None and settings.resign_disabled_fraction is not None  # `resigning`
            resign_games, resigned = resign_lib.observe(resign_games, resign_value, mover, v_resign)
            rewards = jnp.where(resigned[:, None], resign_lib.resign_rewards(mover), rewards)
            ended = ended | resigned
            extra = {
                "resigned": resigned.sum(),
                "resign_counts": resign_lib.outcome_counts(resign_games, ended, rewards),
            }
            resign_games = resign_lib.restart(resign_games, ended, resign_key, settings.resign_disabled_fraction)
        final = None if settings.final_targets is None else jax.vmap(settings.final_targets)(games)  # per player id
        buffer = replay_lib.resolve(buffer, ended, state.episode, rewards, final, resigned)
        decisive = ended & (jnp.abs(rewards).sum(-1) > 0)
        fresh = jax.vmap(env.init)(jax.random.split(reset_key, num_games))
        length = state.ply + 1
        start_ply = jnp.zeros_like(length)  # [B] the plies before each new game's first position
        if forking:  # a new game starts from its slot's candidate with probability f, where there is one
            fork_ply = state.fork_ply
            forks = ended & (fork_ply > 0) & jax.random.bernoulli(fork_key, settings.fork_fraction, ended.shape)
            fresh = where_rows(forks, state.fork, fresh)
            start_ply = jnp.where(forks, fork_ply, 0)
        games = where_rows(ended, fresh, games)
        state = SelfPlayState(
            env=games,
            ply=jnp.where(ended, start_ply, length),
            episode=state.episode + ended,
            resign=resign_games,
            fork=state.fork,
            fork_ply=None if state.fork_ply is None else jnp.where(ended, 0, state.fork_ply),  # new games: none yet
            fork_offers=None if state.fork_offers is None else jnp.where(ended, 0, state.fork_offers),
        )
        metrics = {
            "games": ended.sum(),
            "game_length": jnp.where(ended, length, 0).sum(),
            "decisive": decisive.sum(),
            "full_search_plies": full.astype(jnp.int32),
            **({"forked": forks.sum()} if forking else {}),
            **extra,
        }
        return (state, buffer), metrics

    keys = jax.random.split(rng_key, settings.num_plies)
    plies = first_ply + jnp.arange(settings.num_plies)
    (state, buffer), metrics = jax.lax.scan(step, (state, buffer), (plies, keys))
    return state, buffer, jax.tree.map(lambda x: x.sum(axis=0), metrics)  # over plies; [K] counts stay [K]

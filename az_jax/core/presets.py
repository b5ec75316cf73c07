"""The named starting points of a run (`az-jax train --preset NAME`): the papers' settings, AlphaGo Zero's, and the
CPU-scale `small` presets with the measurements they come from. Each is a `Config`; `--set` changes any key on top."""

import dataclasses
from typing import Any

from az_jax.core.config import Config, ConfigError, get_game_or_error
from az_jax.core.overrides import override

PRESETS = ("small", "hours", "paper", "alphago_zero", "small_agz")


def _paper(game: str) -> Config:
    """The papers' full-scale settings (AlphaZero, Silver et al., Science 2018, Methods and supplementary materials;
    the published pseudocode)."""
    lrs = (0.02, 0.002, 0.0002) if game.startswith("go_") else (0.2, 0.02, 0.002, 0.0002)
    bounds = (300_000, 500_000) if game.startswith("go_") else (100_000, 300_000, 500_000)
    # Paper: 700k steps of batch 4096 with 5,000 TPUs of self-play. The replay window is in games in the papers
    # (AGZ: 500k games, AZ pseudocode: 1M games); on one device we keep 1M positions.
    return Config(
        game=game,
        num_iterations=700_000 // 32,
        num_blocks=19,
        num_channels=256,
        num_simulations=800,
        selfplay_batch_size=1024,
        selfplay_steps=32,
        replay_capacity=1_000_000,
        min_replay_size=65_536,
        batch_size=4096,
        learning_rates=lrs,
        lr_boundaries=bounds,
    )


def _small(game: str) -> Config:
    """A laptop-CPU / single-GPU scale: minutes for the small games on 2 cores. Not in the papers."""
    base: dict[str, Any] = dict(
        game=game,
        num_blocks=2,
        num_channels=32,
        value_hidden=64,
        num_simulations=32,
        selfplay_batch_size=128,
        selfplay_steps=16,
        replay_capacity=65_536,
        min_replay_size=1024,
        # The paper's 0.2 is for minibatches of 4096; scaled linearly to 256 it is 0.0125. Measured on
        # connect_four (fixed buffer, 64 steps): value loss 0.17 at 0.02, stuck at 1.0 at 0.1 and 0.5.
        batch_size=256,
        train_ratio=2.0,
        learning_rates=(0.02, 0.002),
        lr_boundaries=(5000,),
        checkpoint_every=5,
        eval_every=5,
        eval_games=200,
        eval_simulations=32,
        num_iterations=60,
        # every checkpoint is kept (~2 MB each at this scale) so `az-jax ladder` can rate the whole run
        keep_checkpoints=0,
    )
    # Gumbel MuZero's search and policy target at 16 simulations, every trained position under a random one of the
    # board's symmetries: the connect_four, othello, hex and go_9x9 presets (measurements below)
    gumbel16_symmetries: dict[str, Any] = dict(search="gumbel", num_simulations=16, augment_symmetries=True)
    per_game: dict[str, dict[str, Any]] = {
        # Checked move by move against minimax in all 4,520 reachable positions (experiments/tic_tac_toe/README.md): τ =
        # 1 for the whole game, Dirichlet ε = 0.5 and a value target mixed 0.75 with the root's search value took the
        # raw policy from 116-286 wrong moves to 9-36 and 32-simulation search from 18-33 to 0-2 (PUCT) and 0
        # (Gumbel's greedy move, which is chosen by value: `eval_search`). 4 positions trained per generated.
        "tic_tac_toe": dict(
            num_simulations=32,
            selfplay_batch_size=128,
            selfplay_steps=9,
            num_iterations=100,
            train_ratio=4.0,
            learning_rates=(0.1, 0.01),
            lr_boundaries=(1200,),
            temperature_moves=9,
            dirichlet_fraction=0.5,
            value_target_mix=0.75,
            eval_search="gumbel",
        ),
        # Gumbel MuZero's search and policy target at 16 simulations, and the mirror image of half the trained
        # positions (experiments/strength/README.md, §3): after 8 minutes on one core, 3 seeds, the share of optimal
        # moves on the solver set went from 0.58 raw / 0.76 with 64-simulation search (PUCT-32, no symmetries) to 0.70 /
        # 0.83.
        #
        # 30-minute runs on one core each (experiments/strength/README.md §5): 4 trained positions per generated one
        # (train_ratio=4) against 2: raw 0.765 / search 0.866 against 0.777 / 0.847, drawn positions 0.694 against
        # 0.641; a 64-channel network and 32 simulations were behind at equal time.
        #
        # Length and rate step from the compute-scaling study's 30-minute run (experiments/strength/README.md §12):
        # 862 iterations in 30 minutes of 2 cores with the step at iteration 615 ended at 0.870 raw / 0.923 with search,
        # the search share 0.897-0.901 on one rate (iterations 400-600) and 0.902-0.922 after its step. 750 iterations,
        # the rate ×0.1 at 75% of the 24,000 steps, evaluations every 50 (100 games against random and MCTS-100, the
        # solver set): under 30 minutes on the 2-core VM (~2 s an iteration).
        #
        # The first 4 plies of every self-play game uniformly random (experiments/strength/README.md §10): without them
        # self-play settles into drawn games (all of them after ~110 iterations at a GPU's scale, where the solver
        # shares then fell back from 0.883 / 0.920 to 0.843 / 0.895), leaving nothing decisive to learn from. At a
        # GPU's scale they took the shares to 0.942 / 0.968; here 450 iterations ended at 0.839 / 0.897 against 0.813 /
        # 0.868 without (one seed each).
        #
        # The value target mixed half and half with the root's search value (experiments/strength/README.md §19):
        # the same seed with and without it, 750 iterations each on 2 cores, paired on 4,000 solved positions: +0.010
        # to +0.024 with 64-simulation search and +0.020 to +0.034 raw at every checkpoint from 300 to 750 (0.917 /
        # 0.873 against 0.907 / 0.849 at the end); a second seed: +0.022 raw, +0.003 searched at the end (+0.014
        # searched before the rate step). It leads only while the run is short: in the `hours` preset's run
        # it led until iteration 1,200 and was behind with search after that run's rate step, so `hours` turns it off.
        "connect_four": dict(
            num_blocks=3,
            num_channels=32,
            num_iterations=750,
            train_ratio=4.0,
            random_opening_plies=4,
            value_target_mix=0.5,
            lr_boundaries=(18_000,),
            checkpoint_every=10,
            eval_every=50,
            eval_games=100,
            eval_opponents=("random", "mcts:sims=100"),
            eval_solver_simulations=64,
            **gumbel16_symmetries,
        ),
        # othello and hex: Gumbel-16 with the board's symmetries, as go_9x9 below (experiments/presets/): 10 minutes on
        # one core each, seed 0, then 100 games with 32-simulation greedy search against random play and rollout
        # MCTS-100. othello: PUCT-32 (the former preset) finished 67 iterations and scored 0.655 / 0.040, Gumbel-16
        # with symmetries 142 iterations and 1.000 / 0.900. hex: 31 iterations, 0.630 / 0.290, against 82, 0.950 /
        # 0.620. Each preset's iterations are what one core finished in those 10 minutes.
        "othello": dict(num_iterations=140, eval_every=20, eval_games=100, **gumbel16_symmetries),
        "hex": dict(num_iterations=80, eval_every=20, eval_games=100, **gumbel16_symmetries),
        # Gumbel MuZero's search and policy target at 16 simulations, and a random board symmetry on every trained
        # position (experiments/go_9x9/README.md). PUCT's visit target at 32 simulations is spread over 1.9 of ~57 legal
        # moves on average (an unvisited child scores as a loss and its exploration term, C·P·sqrt(N) with
        # P ≈ 1/50, stays below a visited child's Q ≈ 0.5), so it trains the policy on the root noise; Gumbel's
        # completed-Q target improves the prior at any count (Danihelka et al. 2022). Measured after 30 minutes on one
        # core, seed 1, 100 games against random play: PUCT-32 with symmetries 0.72, Gumbel-16 with symmetries 1.00.
        # KataGo's auxiliary ownership and score targets (Wu 2019, "Accelerating Self-Play Learning in Go"): at equal
        # wall-clock (30 minutes, side by side with the preset, one device each; experiments/presets/README.md) the
        # run with them beat the run without in head-to-head games 0.775 (seed 0) and 0.825 (seed 1), 40 games each,
        # at the same iterations (they cost nothing measurable per iteration).
        "go_9x9": dict(
            num_blocks=4,
            num_channels=32,
            selfplay_steps=16,
            num_iterations=100,
            aux_ownership_weight=1.5,
            aux_score_weight=1.0,
            # 100 games against random every 20 iterations: 200 games every 5 took 130-235 s each, longer than the
            # 5 iterations of training between them (issue 16)
            eval_every=20,
            eval_games=100,
            **gumbel16_symmetries,
        ),
        # pgx ends a 19 × 19 game at 722 plies. Each of the 128 self-play slots keeps its last replay_capacity // 128
        # plies (az_jax/core/replay.py): 65,536 rows kept 512, so a longer game's first plies were overwritten before
        # it ended. 131,072 keeps 1,024 (≥ 722 × 128 = 92,416 rows; ~8 KB a row: ~1 GiB).
        "go_19x19": dict(replay_capacity=131_072),
    }
    return dataclasses.replace(Config(), **{**base, **per_game.get(game, {})})


# The games the `hours` preset is measured on (below)
HOURS_GAMES = ("connect_four", "go_9x9")


def _hours(game: str) -> Config:
    """The `small` preset's recipe for a few hours of 2 fast CPU cores (issue 29's compute-scaling study,
    experiments/strength/README.md §35 and §37). Not in the papers. A 4 × 48 network, 2,540 iterations with the rate
    ×0.1 at 75% of them (step 60,960 of 81,280, iteration 1,905), and 30% of self-play games forked from a position of
    an earlier game (as KataGo's self-play forks games, Wu 2019, "Accelerating Self-Play Learning in Go"). Two seeds,
    each about 250 minutes with the evaluations (every 100 iterations: the solver set, 200 games against random and
    200 against rollout MCTS-100) on a 2-core AMD EPYC VM: raw 0.947 / 0.945 and 64-simulation search 0.970 / 0.969 of
    optimal moves on the solver set at the end, 0.925 / 0.930 against rollout MCTS-1000 (100 games); on 4,000 other
    solved positions 0.921 / 0.933 raw and 0.958 / 0.963 searched, ahead of the former `hours` (3 × 32, 2,600
    iterations, ~90 minutes) by +0.016 raw and +0.006 searched a checkpoint after the rate step (the two seeds'
    means). For ~90 minutes: --preset small --set num_iterations=2600 --set lr_boundaries=58800 --set
    value_target_mix=0 (§12, §19)."""
    if game not in HOURS_GAMES:
        raise ConfigError(
            f"the 'hours' preset is measured for {', '.join(HOURS_GAMES)} only, not {game!r}; use --preset small "
            "with --set num_iterations=N and lr_boundaries=M"
        )
    if game == "go_9x9":
        return _hours_go_9x9()
    # z alone as the value target: the `small` preset's mix with the search value led this schedule's run only until
    # iteration 1,200 and was behind with search after its rate step, −0.011 a checkpoint on 4,000 solved positions
    # (experiments/strength/README.md §19)
    return dataclasses.replace(
        _small(game),
        num_blocks=4,
        num_channels=48,
        num_iterations=2540,
        # 2,540 iterations × 128 games × 16 plies × train_ratio 4 / batch 256 = 81,280 steps; the step at 75%
        lr_boundaries=(60_960,),
        fork_fraction=0.3,
        eval_every=100,
        eval_games=200,
        value_target_mix=0.0,
    )


def _hours_go_9x9() -> Config:
    """go_9x9 for two hours of 2 fast CPU cores (issue 29; experiments/go_9x9/README.md, "Liberty planes and the eye
    rule together"). Not in the papers. The `small` network and search (4 × 32, Gumbel at 16 simulations, symmetries,
    KataGo's ownership and score targets) with the stones in atari, with 2 and with 3 liberties as input planes (Wu
    2019, Appendix A) and the mover's own eyes left out of every search (`eye_rule`, as Monte Carlo Go programs'
    playouts), 1,400 iterations of 16 gradient steps with the rate ×0.1 at 40% and again at 80% of them. Measured (seed
    0, a median 5.0 s an iteration; the two hours' timeout stopped it at iteration 1,356): against GNU Go level 1, 13 of
    40 games at 25 minutes, 23 of 40 at 76 and 25 of 40 at 120 (22 of 40 with other openings); level 5 25 of 40, level
    10 15 of 40. Seed 1 (1,400 iterations in 126 minutes): level 1 30 of 40 at 47 minutes, 25 at 100, 26 at 126 (28
    with other openings); levels 5 / 10 22 / 23 of 40 at 126. A slower VM fits fewer iterations in two hours: set
    num_iterations and lr_boundaries (16 steps an iteration) to what fits. No evaluation during training (a match
    against GNU Go is `experiments/go_9x9/gnugo_curve.py`, outside the run)."""
    return dataclasses.replace(
        _small("go_9x9"),
        liberty_planes=True,
        eye_rule="always",
        num_iterations=1400,
        learning_rates=(0.02, 0.002, 0.0002),
        # 1,400 iterations × 128 games × 16 plies × train_ratio 2 / batch 256 = 22,400 steps: 40% and 80%
        lr_boundaries=(8960, 17920),
        eval_every=0,
    )


def _alphago_zero(game: str) -> Config:
    """AlphaGo Zero's 20-block run (AlphaGo Zero, Silver et al., Nature 2017, Methods: network, search, self-play,
    optimisation, evaluator), with the AlphaGo Zero switches on (variant)."""
    config = dataclasses.replace(
        _paper(game),
        # 20 blocks = the stem's conv block + 19 residual blocks, 256 filters (AGZ "Neural network architecture")
        num_blocks=19,
        num_channels=256,
        value_hidden=256,
        # 1,600 simulations per move in self-play and in gating games (AGZ "Self-play", "Evaluator"). AGZ's c_puct is
        # NOT IN THE PAPERS (tuned by Gaussian-process optimisation); we keep AlphaZero's C(s) (c_init, c_base), which
        # is nearly constant over a search of 1,600 simulations.
        num_simulations=1600,
        gating_simulations=1600,
        # Dirichlet ε = 0.25 (AGZ "Self-play"); α: the game's (envs/registry.py; 0.03 for 19×19 Go, as AGZ).
        dirichlet_fraction=0.25,
        # τ = 1 for the first 30 moves, then τ → 0 (AGZ "Self-play")
        temperature_moves=30,
        # 64 workers × 32 = minibatch 2,048; SGD momentum 0.9; c = 1e-4; learning rate 1e-2 → 1e-3 after 400k steps →
        # 1e-4 after 600k steps (AGZ Extended Data Table 3, RL column); the 20-block run took 700k steps (AGZ Methods).
        batch_size=2048,
        momentum=0.9,
        weight_decay=1e-4,
        learning_rates=(1e-2, 1e-3, 1e-4),
        lr_boundaries=(400_000, 600_000),
        # One iteration = 1,024 games × 32 plies = 32,768 positions, and G = round(1.25 × 32,768 / 2,048) = 20 steps
        # (positions trained per position generated: NOT IN THE PAPERS; AGZ's 700k × 2,048 samples over 4.9M games
        # of some 200 moves is ≈ 1.4 [derived, the mean game length is not stated]). So 700k steps = 35,000
        # iterations, and "a checkpoint every 1,000 training steps" is every 50 iterations (AGZ "Optimisation"), each
        # one gated.
        selfplay_batch_size=1024,
        selfplay_steps=32,
        train_ratio=1.25,
        num_iterations=35_000,
        checkpoint_every=50,
        # The window is "the most recent 500,000 games" (AGZ "Optimisation") ≈ 10^8 positions at ~200 moves per game
        # (mean length NOT IN THE PAPERS): ~800 GB for 19×19 Go at ~8 KB a position, so on device we keep 1M positions
        # (~8 GB), the last ≈ 5,000 games. A replay window in positions is the choice of this implementation.
        replay_capacity=1_000_000,
        min_replay_size=65_536,
        # Gating: 400 games, greedy, > 55% to replace the best player (AGZ "Evaluator"), at every checkpoint.
        gating_games=400,
        gating_threshold=0.55,
        gating_every=0,
        # Resignation: 10% of games played out, false positives kept below 5% (AGZ "Self-play"). The initial v_resign
        # and how often it is re-set are NOT IN THE PAPERS: -0.8 (AlphaGo's resignation value) and every 500
        # played-out games (≈ 2 iterations here, at ~200 moves per game).
        resign_disabled_fraction=0.1,
        resign_target_false_positive=0.05,
        v_resign_init=-0.8,
        resign_calibration_games=500,
    )
    return override(config, ["variant=alphago_zero"])


def _small_agz(game: str) -> Config:
    """The `small` preset with the AlphaGo Zero switches on, for CPU (connect_four, go_9x9 in minutes). Not in the
    papers: gating matches of 64 games with the self-play budget, every 5 iterations (each checkpoint), v_resign
    re-set every 20 played-out games (about every 2–3 iterations of connect_four at 128 games × 16 plies)."""
    small = _small(game)
    config = dataclasses.replace(
        small,
        # AlphaGo Zero searches with PUCT: where the small preset uses Gumbel's search (go_9x9), its base 32 simulations
        search="puct",
        num_simulations=small.num_simulations if small.search == "puct" else 32,
        gating_games=64,
        gating_simulations=0,
        gating_threshold=0.55,
        resign_disabled_fraction=0.1,
        resign_target_false_positive=0.05,
        resign_calibration_games=20,
        # AlphaGo Zero has no auxiliary targets, and a resigned game has no final position to learn them from
        aux_ownership_weight=0.0,
        aux_score_weight=0.0,
        # its value target is the game's outcome z alone (AlphaGo Zero, Methods, "Optimization")
        value_target_mix=0.0,
    )
    return override(config, ["variant=alphago_zero"])


def preset(game: str, name: str = "small") -> Config:
    get_game_or_error(game)
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; choose one of: {', '.join(PRESETS)}")
    builders = dict(small=_small, hours=_hours, paper=_paper, alphago_zero=_alphago_zero, small_agz=_small_agz)
    return builders[name](game)

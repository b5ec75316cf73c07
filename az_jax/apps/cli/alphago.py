"""`az-jax alphago STAGE`: the AlphaGo (Nature 2016) pipeline on pgx Go, one subcommand per stage.

    az-jax alphago games   --out DIR --games N [--level 10] [--workers 2]    9×9 GNU Go self-play "expert" games
    az-jax alphago data    --size 19|9 [--source DIR ...] [--out FILE]      expert games -> a position data set
    az-jax alphago sl      --data DATA --run-dir DIR [--filters K ...]       the SL policy network p_σ
    az-jax alphago rollout --data DATA --out FILE [--steps N ...]            the rollout policy p_π
    az-jax alphago tree    --data DATA --out FILE [--steps N ...]            the tree policy p_τ (not searched with)
    az-jax alphago rl      --sl DIR --run-dir DIR [--games N ...]            the RL policy network p_ρ
    az-jax alphago value-data --sl DIR --rl DIR --out DATA --games N         one position per self-play game
    az-jax alphago value   --data DATA --run-dir DIR [--filters K ...]       the value network v_θ
    az-jax alphago pipeline --preset NAME --dir DIR [--until STAGE] [--data FILE] [--set STAGE.KEY=VALUE ...]
                                                                                   every stage above (resumable)

An agent directory (az_jax/alphago/agent.py: DIR/sl, DIR/rollout.npz, DIR/tree.npz, DIR/rl, DIR/value_data,
DIR/value) is what the `alphago:DIR` player searches with; `pipeline` runs every stage into one from a preset
(az_jax/alphago/presets.py: 9x9-cpu, 9x9, 19x19, 19x19-smoke), and `alphago:DIR` then searches as the preset says.

A data set (DATA) is a directory that `data` and `value-data` write a part at a time and the training stages read
as memory maps (never whole), or, where the path ends in .npz, one file written and read whole (small sets).

Each stage is a module of az_jax/alphago/; this file only parses and reports.
"""

import argparse
import json
import os
import sys

from az_jax.apps.cli.args import UsageError, bounded_int, path, positive_float, positive_int

STAGES = ("games", "data", "sl", "rollout", "tree", "rl", "value-data", "value", "pipeline")


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("alphago", help="the AlphaGo (2016) pipeline: expert data, SL policy, ...")
    stages = parser.add_subparsers(dest="stage", required=True)

    games = stages.add_parser("games", help="9x9 expert games by GNU Go self-play (resumable)")
    games.add_argument("--out", type=path, default=None, metavar="DIR", help="default: $AZ_JAX_DATA/gnugo9")
    games.add_argument("--games", type=positive_int, required=True, help="distinct games the directory should hold")
    games.add_argument("--level", type=bounded_int(0, 10), default=10, help="GNU Go level (default 10)")
    games.add_argument("--workers", type=bounded_int(1, 256), default=1, help="GNU Go processes in parallel")
    games.add_argument("--seed", type=bounded_int(0, 2**31 - 1), default=0)

    data = stages.add_parser("data", help="expert games (SGF/MGT) -> a data set of positions and moves")
    data.add_argument("--size", type=int, choices=(9, 19), required=True)
    data.add_argument(
        "--source",
        type=path,
        action="append",
        default=None,
        metavar="DIR",
        help="a directory of SGF/MGT games, repeatable (default for 19: Debian's goban-original-games and "
        "kombilo's professional games; for 9: the GNU Go games of `az-jax alphago games`)",
    )
    data.add_argument(
        "--out", type=path, default=None, metavar="DATA", help="default: $AZ_JAX_DATA/alphago/go_NxN_positions"
    )
    data.add_argument("--overwrite", action="store_true", help="replace an existing data set")

    sl = stages.add_parser("sl", help="train the SL policy network p_sigma on a data set (resumes in its run dir)")
    sl.add_argument("--data", type=path, required=True, metavar="DATA", help="a data set of `az-jax alphago data`")
    sl.add_argument("--run-dir", type=path, required=True)
    sl.add_argument("--filters", type=bounded_int(1, 1024), default=None, help="k (paper: 192)")
    sl.add_argument("--layers", type=bounded_int(2, 64), default=None, help="layers (paper: 13)")
    sl.add_argument("--planes", type=int, choices=(4, 12, 20, 48), default=None, help="input planes (paper: 48)")
    sl.add_argument("--batch-size", type=bounded_int(1, 65536), default=None, help="m (default 64; paper: 16)")
    sl.add_argument("--learning-rate", type=positive_float, default=None, help="alpha (default 0.012; paper: 0.003)")
    sl.add_argument("--steps", type=positive_int, default=None)
    sl.add_argument("--halve-every", type=positive_int, default=None, help="default: steps * 80 / 340 (the paper's)")
    sl.add_argument("--no-symmetries", action="store_true", help="no 8-fold augmentation")
    sl.add_argument("--eval-every", type=positive_int, default=None)
    sl.add_argument("--seed", type=bounded_int(0, 2**31 - 1), default=None)

    # p_π and p_τ (tree_policy.py: p_π's features and more) train and report alike
    for name, help_text in (
        ("rollout", "train the linear rollout policy p_pi; accuracy and time per move"),
        ("tree", "train the linear tree policy p_tau (p_pi's features and more); accuracy and time per move"),
    ):
        pattern = stages.add_parser(name, help=help_text)
        pattern.add_argument(
            "--data", type=path, required=True, metavar="DATA", help="a data set of `az-jax alphago data`"
        )
        pattern.add_argument("--out", type=path, required=True, metavar="FILE", help="the policy (.npz)")
        pattern.add_argument(
            "--run-dir", type=path, default=None, help="the training run (resumes; default: FILE without .npz + _run)"
        )
        pattern.add_argument("--steps", type=positive_int, default=6000)
        pattern.add_argument("--batch-size", type=bounded_int(1, 65536), default=256)
        pattern.add_argument("--learning-rate", type=positive_float, default=2.0)
        pattern.add_argument("--min-count", type=bounded_int(1, 10**9), default=2, help="a pattern's least occurrences")
        pattern.add_argument("--max-train", type=bounded_int(0, 10**9), default=0, help="subsample (0: all positions)")
        pattern.add_argument(
            "--buffer", type=bounded_int(1, 10**9), default=65_536, help="positions encoded at once (bounds memory)"
        )
        pattern.add_argument("--eval-every", type=positive_int, default=1000)
        pattern.add_argument("--seed", type=bounded_int(0, 2**31 - 1), default=0)

    rl = stages.add_parser("rl", help="train the RL policy network p_rho by REINFORCE against a pool (resumes)")
    rl.add_argument("--sl", type=path, required=True, metavar="DIR[@STEP]", help="the SL run p_rho starts from")
    rl.add_argument("--run-dir", type=path, required=True)
    rl.add_argument("--games", type=bounded_int(2, 65536), default=None, help="n, games per iteration (paper: 128)")
    rl.add_argument("--iterations", type=positive_int, default=None, help="(paper: 10,000)")
    rl.add_argument("--learning-rate", type=positive_float, default=None)
    rl.add_argument("--pool-every", type=positive_int, default=None, help="a new pool member every N (paper: 500)")
    rl.add_argument("--eval-every", type=positive_int, default=None, help="iterations between games against p_sigma")
    rl.add_argument("--eval-games", type=bounded_int(0, 65536), default=None)
    rl.add_argument("--checkpoint-every", type=positive_int, default=None)
    rl.add_argument("--seed", type=bounded_int(0, 2**31 - 1), default=None)

    vdata = stages.add_parser("value-data", help="one position per self-play game (p_sigma, a random move, p_rho)")
    vdata.add_argument("--sl", type=path, required=True, metavar="DIR[@STEP]", help="p_sigma's run")
    vdata.add_argument("--rl", type=path, required=True, metavar="DIR[@STEP]", help="p_rho's run (or an SL run)")
    vdata.add_argument("--out", type=path, required=True, metavar="DATA", help="a directory (appended to) or FILE.npz")
    vdata.add_argument("--games", type=positive_int, required=True, help="games (= positions) the file should hold")
    vdata.add_argument("--batch", type=bounded_int(1, 65536), default=256, help="games played at once")
    vdata.add_argument("--seed", type=bounded_int(0, 2**31 - 1), default=0)
    vdata.add_argument("--overwrite", action="store_true", help="replace a file built with other settings")

    value = stages.add_parser("value", help="train the value network v_theta on `value-data` positions (resumes)")
    value.add_argument(
        "--data", type=path, required=True, metavar="DATA", help="a data set of `az-jax alphago value-data`"
    )
    value.add_argument("--run-dir", type=path, required=True)
    value.add_argument("--filters", type=bounded_int(1, 1024), default=None, help="k (paper: 192)")
    value.add_argument("--layers", type=bounded_int(2, 64), default=None, help="convolutional layers (paper: 13)")
    value.add_argument("--hidden", type=bounded_int(1, 4096), default=None, help="dense units (paper: 256)")
    value.add_argument("--batch-size", type=bounded_int(1, 65536), default=None, help="m (paper: 32)")
    value.add_argument("--learning-rate", type=positive_float, default=None)
    value.add_argument("--steps", type=positive_int, default=None)
    value.add_argument("--no-symmetries", action="store_true", help="no 8-fold augmentation")
    value.add_argument("--eval-every", type=positive_int, default=None)
    value.add_argument("--seed", type=bounded_int(0, 2**31 - 1), default=None)

    pipeline = stages.add_parser("pipeline", help="every stage into an agent directory, from a preset (resumable)")
    # names checked in run(): the presets module imports the library, which this parser must not
    pipeline.add_argument(
        "--preset", required=True, metavar="NAME", help="9x9-cpu, 9x9, 19x19 or 19x19-smoke (alphago/presets.py)"
    )
    pipeline.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="STAGE.KEY=VALUE",
        help="change one setting of the preset (repeatable): sl.steps=500, rl.games=32, search.simulations=64, "
        "value_games=4096, ... (give the same ones on every run of a directory)",
    )
    pipeline.add_argument("--dir", type=path, required=True, metavar="DIR", help="the agent directory")
    pipeline.add_argument(
        "--until",
        default=None,
        metavar="STAGE",
        help="stop after this stage: games, data, sl, rollout, tree, rl, value-data or value (default: all)",
    )
    pipeline.add_argument(
        "--data",
        type=path,
        default=None,
        metavar="FILE",
        help="an existing position data set (`az-jax alphago data`) instead of the expert games and the cached one",
    )
    pipeline.add_argument("--workers", type=bounded_int(1, 256), default=None, help="GNU Go processes (default: cores)")
    return parser


def _given(args, names: tuple[str, ...]) -> dict:
    """The options of `names` the user gave (None: the config's default)."""
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}


def _run_and_step(text: str) -> tuple[str, int | None]:
    """DIR[@STEP] -> (DIR, STEP or None)."""
    head, at, tail = text.rpartition("@")
    if not at:
        return text, None
    if not tail.isdigit():
        raise UsageError(f"{text}: the step after @ must be an integer")
    return head, int(tail)


def _report(report: dict) -> None:
    print(json.dumps(report, default=str))


def run(args) -> int:
    # The library starts JAX's backend: imported after main's device set-up.
    from az_jax.alphago import (
        corpus,
        dataset,
        gnugo_games,
        pattern_training,
        pipeline,
        presets,
        reinforce,
        rollout_policy,
        supervised,
        tree_policy,
        value_data,
        value_store,
        value_training,
    )

    try:
        if args.stage == "games":
            out = args.out or gnugo_games.default_dir(9)
            try:
                report = gnugo_games.generate(out, args.games, level=args.level, workers=args.workers, seed=args.seed)
            except ValueError as e:  # generate's argument checks
                raise UsageError(str(e)) from None
            _report(report)
        elif args.stage == "data":
            sources = args.source or (
                corpus.default_sources(args.size) if args.size == 19 else [gnugo_games.default_dir(9)]
            )
            out = args.out or dataset.default_path(args.size)
            _report(dataset.build(sources, args.size, out, overwrite=args.overwrite))
        elif args.stage == "sl":
            train, test = dataset.load_split(args.data)
            size = int(round(train.position.board.shape[-1] ** 0.5))
            options = {
                "filters": args.filters,
                "layers": args.layers,
                "planes": args.planes,
                "batch_size": args.batch_size,
                "learning_rate": args.learning_rate,
                "steps": args.steps,
                "halve_every": args.halve_every,
                "eval_every": args.eval_every,
                "seed": args.seed,
            }
            try:
                config = supervised.SLConfig(
                    size=size, symmetries=not args.no_symmetries, **{k: v for k, v in options.items() if v is not None}
                )
            except ValueError as e:  # SLConfig's checks
                raise UsageError(str(e)) from None
            print(
                f"az-jax: SL policy on {len(train.action)} positions ({len(test.action)} held out), {config}",
                file=sys.stderr,
            )
            _report(supervised.train(config, train, test, args.run_dir, data_path=args.data, log=_report))
        elif args.stage in ("rollout", "tree"):
            train, test = dataset.load_split(args.data)
            rollout_config = pattern_training.TrainConfig(
                steps=args.steps,
                batch_size=args.batch_size,
                learning_rate=args.learning_rate,
                min_count=args.min_count,
                max_train=args.max_train,
                seed=args.seed,
                buffer=args.buffer,
                eval_every=args.eval_every,
            )
            # p_τ is p_π's training and timing on more features (tree_policy.TREE)
            family = tree_policy.TREE if args.stage == "tree" else rollout_policy.ROLLOUT
            run_dir = args.run_dir or os.path.splitext(args.out)[0] + "_run"
            policy, report = pattern_training.train(
                rollout_config, train, test, run_dir, family, data_path=args.data, log=_report
            )
            report["time_per_move"] = [
                rollout_policy.time_per_move(policy, test.position, b, repeats=200 if b == 1 else 20, family=family)
                for b in (1, 256)
            ]
            family.save(args.out, policy, report)
            _report(report)
        elif args.stage == "rl":
            sl_dir, sl_step = _run_and_step(args.sl)
            names = ("games", "iterations", "learning_rate", "pool_every", "eval_every", "eval_games", "seed")
            try:
                rl_config = reinforce.RLConfig(**_given(args, (*names, "checkpoint_every")))
            except ValueError as e:  # RLConfig's checks
                raise UsageError(str(e)) from None
            _report(reinforce.train(rl_config, sl_dir, args.run_dir, sl_step=sl_step, log=_report))
        elif args.stage == "value-data":
            sl_dir, sl_step = _run_and_step(args.sl)
            rl_dir, rl_step = _run_and_step(args.rl)
            sl_config, sl_params, _ = supervised.restore_params(sl_dir, sl_step)
            rho_config, rl_params, _ = reinforce.restore_policy(rl_dir, rl_step)
            if sl_config.size != rho_config.size:
                raise UsageError(
                    f"{args.sl} is {sl_config.size}x{sl_config.size}, {args.rl} {rho_config.size}x{rho_config.size}"
                )
            report = value_data.build(
                args.out,
                (sl_config, sl_params),
                (rho_config, rl_params),
                sl_config.size,
                args.games,
                batch=args.batch,
                seed=args.seed,
                overwrite=args.overwrite,
                log=_report,
            )
            _report(report)
        elif args.stage == "value":
            train_v, test_v = value_store.load_split(args.data)
            size = int(round(train_v.position.board.shape[-1] ** 0.5))
            value_names = ("filters", "layers", "hidden", "batch_size", "learning_rate", "steps", "eval_every", "seed")
            try:
                value_config = value_training.ValueConfig(
                    size=size, symmetries=not args.no_symmetries, **_given(args, value_names)
                )
            except ValueError as e:  # ValueConfig's checks
                raise UsageError(str(e)) from None
            print(
                f"az-jax: value network on {len(train_v)} positions ({len(test_v)} held out), {value_config}",
                file=sys.stderr,
            )
            _report(value_training.train(value_config, train_v, test_v, args.run_dir, data_path=args.data, log=_report))
        elif args.stage == "pipeline":
            if args.preset not in presets.PRESETS:
                raise UsageError(f"unknown preset {args.preset!r}; the presets are {', '.join(presets.PRESETS)}")
            preset = presets.override(presets.PRESETS[args.preset], args.set)  # an unknown --until: PipelineError
            _report(pipeline.run(preset, args.dir, until=args.until, data=args.data, workers=args.workers, log=_report))
        else:  # argparse allows only STAGES
            raise UsageError(f"unknown stage {args.stage!r}")
    except (
        corpus.CorpusError,
        dataset.DatasetError,
        supervised.SLError,
        pattern_training.PatternTrainingError,
        rollout_policy.RolloutPolicyError,
        tree_policy.TreePolicyError,
        value_data.ValueDataError,
        value_training.ValueRunError,
        pipeline.PipelineError,
        presets.PresetError,
    ) as e:
        raise UsageError(str(e)) from None
    return 0

"""Trains pgx's own AlphaZero example (the peer of issue 4) on connect four for a fixed wall-clock on this machine and
scores its network on az_jax's solver benchmark, so the two libraries compare on learning, not only on speed.

    python -m experiments.peers.peer_learning --example-dir PGX_CHECKOUT/examples/alphazero --out DIR \
        [--minutes 30] [--devices 2] [--threads auto|default|one-per-device] [--save-every 10] [--score-all] \
        [--num-layers 3] [--num-channels 32] [--selfplay-batch-size 128] [--max-num-steps 64] \
        [--training-batch-size 256] [--num-simulations 32] [--learning-rate 0.001] [--seed 0] \
        [--score-simulations 64] [--positions FILE] [--positions-limit P] [--json FILE]

Nothing of the example is copied here, as in experiments/peers/peer_pgx_example.py: this script imports the example's
`train.py` from your checkout of https://github.com/sotetsuk/pgx (it needs `pip install dm-haiku omegaconf pydantic`;
`wandb`, which the example imports for its logging, is replaced by an empty module, and `pgx.make_baseline_model`,
which only its `evaluate` uses and which has no connect-four model, by a stub). The settings below reach the example
as its own command-line config (`key=value`, read by OmegaConf when `train.py` is imported), so its network, its
Gumbel self-play, its loss and its Adam optimizer are built by its own code. The loop runs its jitted `selfplay`,
`compute_loss_input` and `train` exactly as its main loop does: a fresh batch of games from the start position every
iteration, `max_num_steps` plies each (a finished game restarts; a game cut off at the end gets no value target),
shuffled on the host and trained on once in minibatches. Its `evaluate` (sampled play against a baseline) and its
pickled checkpoints are left out: instead, every `--save-every` iterations, at iteration 0 and at the end, the
network's params and batch-norm state are written to OUT/iteration_NNNNNN.npz (numpy arrays keyed by their
jax.tree_util key paths, no pickle) and a line {iteration, seconds, frames, losses, file} to OUT/curve.jsonl.
Iterations start while less than `--minutes` have passed since the first one began (compilation included), so the
last one may end up to one iteration past the budget; `seconds` says exactly when each network was saved.

Then the final network (with --score-all every saved one) is scored on the connect-four solver benchmark
(experiments/strength/solver_benchmark.py: the share of moves that keep the game-theoretic value on 1,000 solved
positions): * raw: argmax of its policy logits, illegal moves masked;
  * searchS: greedy S-simulation search with its network: the search az_jax's connect_four small preset plays with
    (az_jax/core/search.py `greedy_search` with `SearchConfig.for_play` of that preset: today mctx.gumbel_muzero_policy
    without Gumbel noise, its recommended move), its `recurrent_fn` stepping pgx and evaluating the example's network
    in inference mode (batch norm on its running averages).
One line per result in solver_benchmark's format, and OUT/scores.json (also --json FILE) with everything.

Defaults, for a 2-core CPU (the example's own defaults, a 6 x 128 network, 1,024 games x 256 plies per iteration and
training batches of 4,096, are sized for GPUs: 262,144 searched positions per iteration, far too many here):
  * the example's own: Gumbel search with num_simulations 32, learning_rate 0.001 (Adam), resnet_v2, seed 0;
  * scaled to az_jax's connect_four small preset: num_layers 3 x num_channels 32 (the example's AZNet takes any),
    selfplay_batch_size 128 games, training_batch_size 256;
  * max_num_steps 64, not the preset's 16 plies: az_jax's games go on from one iteration to the next, the example's
    start afresh every iteration, so with 16 plies it would never see a position past ply 16 and almost never a value
    target. 64 >= 42, the longest connect-four game, so every game started at ply 0 ends within the iteration (the
    example's own 256 plies scaled down 4x, its 1,024 games 8x). One iteration is 128 x 64 = 8,192 positions, trained
    on once: 32 minibatches of 256.
  * --threads auto: the rule az_jax's CLI applies (az_jax/runtime/host_devices.py: one Eigen thread per device when
  there are at least as many devices as cores), so both libraries run on the same XLA settings; `default` leaves XLA's
    (how the example runs when given host devices), `one-per-device` always adds the flag.
"""

import argparse
import hashlib
import importlib
import importlib.util
import json
import os
import sys
import time
from typing import Any

import numpy as np

from experiments.peers.pgx_example import import_example, shuffled_minibatches

PROG = "peer_learning"


class UsageError(Exception):
    """A flag, path or environment problem the user can fix (one-line message, exit 2)."""


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--example-dir", required=True, help="pgx checkout's examples/alphazero directory")
    parser.add_argument("--out", required=True, help="directory for curve.jsonl, the .npz networks and scores.json")
    parser.add_argument("--minutes", type=float, default=30.0, help="wall-clock training budget")
    parser.add_argument("--devices", type=int, default=1, help="host devices (the example pmaps over them)")
    parser.add_argument("--threads", choices=["auto", "default", "one-per-device"], default="auto")
    parser.add_argument("--save-every", type=int, default=10, help="save the network every K iterations")
    parser.add_argument("--score-all", action="store_true", help="score every saved network, not only the last")
    parser.add_argument("--num-layers", type=int, default=3)
    parser.add_argument("--num-channels", type=int, default=32)
    parser.add_argument("--selfplay-batch-size", type=int, default=128)
    parser.add_argument("--max-num-steps", type=int, default=64, help="plies per self-play iteration")
    parser.add_argument("--training-batch-size", type=int, default=256)
    parser.add_argument("--num-simulations", type=int, default=32, help="the example's Gumbel self-play search")
    parser.add_argument("--learning-rate", type=float, default=0.001)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--score-simulations", type=int, default=64, help="simulations of the scored search")
    parser.add_argument("--positions", default=None, help="solver positions (default: solver_benchmark's set)")
    parser.add_argument("--positions-limit", type=int, default=None, help="score on the first P positions only")
    parser.add_argument("--json", default=None, help="also write the results here")
    return parser.parse_args(argv)


def check_args(args) -> None:
    """Raises UsageError for a value the run cannot use (before anything is imported or trained)."""
    train_py = os.path.join(args.example_dir, "train.py")
    if not os.path.isfile(train_py) or not os.path.isfile(os.path.join(args.example_dir, "network.py")):
        raise UsageError(f"no train.py and network.py in --example-dir {args.example_dir!r}")
    positive = {
        "--minutes": args.minutes,
        "--devices": args.devices,
        "--save-every": args.save_every,
        "--num-channels": args.num_channels,
        "--selfplay-batch-size": args.selfplay_batch_size,
        "--max-num-steps": args.max_num_steps,
        "--training-batch-size": args.training_batch_size,
        "--num-simulations": args.num_simulations,
        "--learning-rate": args.learning_rate,
        "--score-simulations": args.score_simulations,
    }
    for flag, value in positive.items():
        if not value > 0:
            raise UsageError(f"{flag} must be positive, got {value}")
    if args.num_layers < 0:
        raise UsageError(f"--num-layers must be at least 0, got {args.num_layers}")
    if args.positions_limit is not None and args.positions_limit < 1:
        raise UsageError(f"--positions-limit must be at least 1, got {args.positions_limit}")
    n = args.devices
    for flag, value in [
        ("--selfplay-batch-size", args.selfplay_batch_size),
        ("--training-batch-size", args.training_batch_size),
    ]:
        if value % n:
            raise UsageError(f"{flag} {value} is not a multiple of --devices {n} (the example splits it over them)")
    positions = args.selfplay_batch_size * args.max_num_steps
    if positions % args.training_batch_size:
        # The example reshapes an iteration's positions into (updates, devices, batch / devices): it needs a whole
        # number of minibatches.
        raise UsageError(
            f"--selfplay-batch-size x --max-num-steps = {positions} positions per iteration is not a multiple of "
            f"--training-batch-size {args.training_batch_size}"
        )
    if os.path.exists(os.path.join(args.out, "curve.jsonl")):
        raise UsageError(f"{os.path.join(args.out, 'curve.jsonl')} exists: choose a new --out (nothing is overwritten)")
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise UsageError(f"--out {args.out!r} is not a directory")
    missing = [pip for module, pip in [("haiku", "dm-haiku"), ("omegaconf", "omegaconf"), ("pydantic", "pydantic")]
               if importlib.util.find_spec(module) is None]  # fmt: skip
    if missing:
        raise UsageError(f"the example needs {', '.join(missing)}: pip install dm-haiku omegaconf pydantic")


def set_host_devices(count: int, threads: str) -> str:
    """XLA_FLAGS for `count` host devices, set before JAX starts its backend (the example's import does)."""
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={count}".strip()
    if threads == "one-per-device":
        flags += " --xla_cpu_multi_thread_eigen=false"
    elif threads == "auto":
        from az_jax.runtime import host_devices  # imports jax, which starts no backend until the first array

        flags = host_devices.xla_flags(flags, count, host_devices.available_cores())
    os.environ["XLA_FLAGS"] = flags
    return flags


def example_overrides(args) -> list[str]:
    """The example's config keys (its `Config` fields), as its command line gives them."""
    return [
        "env_id=connect_four",
        f"seed={args.seed}",
        f"num_layers={args.num_layers}",
        f"num_channels={args.num_channels}",
        f"selfplay_batch_size={args.selfplay_batch_size}",
        f"max_num_steps={args.max_num_steps}",
        f"training_batch_size={args.training_batch_size}",
        f"num_simulations={args.num_simulations}",
        f"learning_rate={args.learning_rate!r}",
    ]


def save_network(path: str, model) -> None:
    """(params, state) of one device -> an .npz keyed by jax.tree_util key paths; never overwrites."""
    import jax

    params, state = model
    leaves = jax.tree_util.tree_flatten_with_path({"params": params, "state": state})[0]
    arrays: dict[str, Any] = {jax.tree_util.keystr(p): np.asarray(x) for p, x in leaves}
    with open(path, "xb") as f:
        np.savez(f, allow_pickle=False, **arrays)


def load_network(path: str, template):
    """The (params, state) saved by `save_network`, in the structure of `template` (the example's init)."""
    import jax

    params, state = template
    leaves, treedef = jax.tree_util.tree_flatten_with_path({"params": params, "state": state})
    with np.load(path, allow_pickle=False) as saved:
        names = [jax.tree_util.keystr(p) for p, _ in leaves]
        if sorted(names) != sorted(saved.files):
            raise ValueError(f"{path}: its arrays do not match the example's network at these settings")
        arrays = [saved[name] for name in names]
    for name, array, (_, like) in zip(names, arrays, leaves):
        if array.shape != like.shape:
            raise ValueError(f"{path}: {name} has shape {array.shape}, the network {like.shape}")
    tree = jax.tree_util.tree_unflatten(treedef, arrays)
    return tree["params"], tree["state"]


def train(ex, args, out: str) -> list[dict]:
    """The example's main loop for `args.minutes` (its evaluation and pickled checkpoints left out), saving the
    network as it goes. Returns the curve.jsonl records."""
    import jax
    import jax.numpy as jnp

    n = ex.num_devices
    curve: list[dict] = []

    def save(iteration: int, seconds: float, frames: int, losses: tuple[float, float] | None) -> None:
        name = f"iteration_{iteration:06d}.npz"
        save_network(os.path.join(out, name), jax.device_get(jax.tree.map(lambda x: x[0], model)))
        record = {"iteration": iteration, "seconds": round(seconds, 3), "frames": frames, "file": name}
        if losses is not None:
            record.update(policy_loss=losses[0], value_loss=losses[1])
        with open(os.path.join(out, "curve.jsonl"), "x" if not curve else "a") as f:
            f.write(json.dumps(record) + "\n")
        curve.append(record)

    rng_key, init_key = jax.random.split(jax.random.key(args.seed))
    dummy = jax.vmap(ex.env.init)(jax.random.split(init_key, 2)).observation
    rng_key, init_key = jax.random.split(rng_key)
    model = ex.forward.init(init_key, dummy)  # (params, state)
    opt_state = ex.optimizer.init(params=model[0])
    model, opt_state = jax.tree.map(lambda x: jnp.stack([x] * n), (model, opt_state))  # replicated, as pmap expects
    save(0, 0.0, 0, None)

    iteration, frames, losses = 0, 0, None
    start = time.perf_counter()
    while time.perf_counter() - start < args.minutes * 60:
        iteration += 1
        # The example's main loop from here: self-play, then shuffle on the host, minibatches, one pmapped step each.
        rng_key, subkey = jax.random.split(rng_key)
        data = ex.selfplay(model, jax.random.split(subkey, n))
        samples = ex.compute_loss_input(data)
        rng_key, subkey = jax.random.split(rng_key)
        positions, num_updates, minibatches = shuffled_minibatches(samples, subkey, n, args.training_batch_size)
        frames += positions
        policy_losses, value_losses = [], []
        for i in range(num_updates):
            minibatch = jax.tree.map(lambda x, i=i: x[i], minibatches)
            model, opt_state, policy_loss, value_loss = ex.train(model, opt_state, minibatch)
            policy_losses.append(policy_loss.mean().item())
            value_losses.append(value_loss.mean().item())
        losses = (sum(policy_losses) / num_updates, sum(value_losses) / num_updates)
        seconds = time.perf_counter() - start
        print(
            f"iteration {iteration}: {seconds:.1f} s, {frames} positions, policy loss {losses[0]:.3f}, "
            f"value loss {losses[1]:.3f}",
            flush=True,
        )
        if iteration % args.save_every == 0:
            save(iteration, seconds, frames, losses)
    if curve[-1]["iteration"] != iteration:
        save(iteration, time.perf_counter() - start, frames, losses)
    return curve


def players(ex, model, simulations: int):
    """(raw, search) `(states, key) -> actions` players of the example's network `model` = (params, state)."""
    import jax.numpy as jnp

    from az_jax.core import presets as presets_lib
    from az_jax.core import search as search_lib

    variables = {"params": model[0], "state": model[1]}
    apply_fn = lambda v, obs: ex.forward.apply(v["params"], v["state"], obs, is_eval=True)[0]  # (logits, value)
    search = search_lib.SearchConfig.for_play(presets_lib.preset("connect_four", "small"), simulations)
    raw = lambda states, key: jnp.argmax(
        search_lib.mask_logits(apply_fn(variables, states.observation)[0], states.legal_action_mask), axis=-1
    )
    searched = lambda states, key: search_lib.greedy_search(apply_fn, ex.env, variables, key, states, search)[0]
    return raw, searched


def score(ex, out: str, records: list[dict], positions, simulations: int) -> list[dict]:
    """Solver benchmark of the saved networks `records` (curve.jsonl lines), read back from their .npz files."""
    import jax

    from az_jax.evaluation import connect_four_solver as solver_lib
    from experiments.strength.solver_benchmark import line

    template = ex.forward.init(
        jax.random.key(0), jax.vmap(ex.env.init)(jax.random.split(jax.random.key(0), 2)).observation
    )
    rows = []
    for record in records:
        raw, searched = players(ex, load_network(os.path.join(out, record["file"]), template), simulations)
        row = {
            **record,
            "raw": solver_lib.evaluate(raw, positions, jax.random.key(0)).summary(),
            f"search{simulations}": solver_lib.evaluate(searched, positions, jax.random.key(1)).summary(),
        }
        print(f"{out}/{record['file']} (iteration {record['iteration']}, {record['seconds']:.0f} s)")
        for name in ("raw", f"search{simulations}"):
            print("  " + line(name, row[name]), flush=True)
        rows.append(row)
    return rows


def file_sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def run(args) -> int:
    check_args(args)
    xla_flags = set_host_devices(args.devices, args.threads)
    from az_jax.evaluation import connect_four_solver as solver_lib
    from experiments.strength.solver_benchmark import DEFAULT_POSITIONS

    positions_path = args.positions or DEFAULT_POSITIONS
    try:
        positions = solver_lib.load(positions_path)
    except (OSError, ValueError) as e:
        raise UsageError(str(e)) from None
    if args.positions_limit is not None:
        positions = solver_lib.PositionSet(*(a[: args.positions_limit] for a in positions))
    overrides = example_overrides(args)
    import pydantic

    try:
        ex = import_example(args.example_dir, overrides)
    except (ImportError, AttributeError, pydantic.ValidationError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UsageError(
            f"the example in {args.example_dir} does not import here ({type(e).__name__}: {first})"
        ) from None
    import jax
    import pgx

    os.makedirs(args.out, exist_ok=True)
    curve = train(ex, args, args.out)
    rows = score(ex, args.out, curve if args.score_all else curve[-1:], positions, args.score_simulations)
    result = {
        "peer": "pgx examples/alphazero/train.py",
        "example_dir": os.path.abspath(args.example_dir),
        "train_py_sha256": file_sha256(os.path.join(args.example_dir, "train.py")),
        "network_py_sha256": file_sha256(os.path.join(args.example_dir, "network.py")),
        "game": "connect_four",
        "example_config": overrides,
        "minutes": args.minutes,
        "devices": ex.num_devices,
        "threads": args.threads,
        "xla_flags": xla_flags,
        "iterations": curve[-1]["iteration"],
        "seconds": curve[-1]["seconds"],
        "frames": curve[-1]["frames"],
        "positions": os.path.abspath(positions_path),
        "positions_scored": len(positions.moves),
        "score_simulations": args.score_simulations,
        "curve": curve,
        "scores": rows,
        "jax": jax.__version__,
        "pgx": pgx.__version__,
    }
    text = json.dumps(result, indent=1) + "\n"
    with open(os.path.join(args.out, "scores.json"), "x") as f:
        f.write(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)
    return 0


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        return run(args)
    except UsageError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

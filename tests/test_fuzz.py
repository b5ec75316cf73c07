"""Hostile input, generated: more than a thousand invalid `az-jax` invocations (bad numbers, unknown flags, config
overrides, player specs, config.json files, game records), each run in this process through `az_jax.apps.cli.main`.
Every one must end with exit status 2 and exactly one line `az-jax: error: ...` on stderr (no traceback), and an
existing run dir must be byte for byte what it was. Nothing may reach real work: the `no_work` fixture turns training,
benchmarks, matches, game compilation and sweeps into an AssertionError, so an input the CLI wrongly accepts fails the
test instead of starting to train."""

import hashlib
import json
import math
import os
import random

import chess
import pytest
from test_cli import fake_run_dir, in_process, no_work  # noqa: F401  (no_work: a fixture this file's test uses)

from az_jax.apps.cli.args import MAX_COUNT, MAX_DEVICES, MAX_SEED, MAX_SIMULATIONS
from az_jax.core import config as config_lib
from az_jax.core import presets as presets_lib
from az_jax.evaluation import players
from az_jax.runtime.checkpoint import CheckpointError
from envs import records

SEED = 13
NOT_INTEGERS = ["", " ", "abc", "1.5", "1e3", "1e30", "nan", "inf", "-inf", "0x10", "1_000", "\u0661", "+-1", "2**8"]
NOT_INTEGERS += ["9" * 40, "١٢", "1 2", "0.0", "-0.5"]


def tree_hash(root: str) -> str:
    """SHA-256 over every file's relative path and bytes under `root` (and every directory's name)."""
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in sorted(os.walk(root)):
        dirnames.sort()
        digest.update(os.path.relpath(dirpath, root).encode())
        for name in sorted(filenames):
            digest.update(name.encode())
            with open(os.path.join(dirpath, name), "rb") as f:
                digest.update(f.read())
    return digest.hexdigest()


# --- command lines ---------------------------------------------------------------------------------------------------
def bad_numbers(low: int, high: int) -> list[str]:
    """Values an integer flag in [low, high] must refuse."""
    return NOT_INTEGERS + [str(low - 1), str(low - 100), str(high + 1), str(high * 10**6)]


def number_flags(good: str, spec: str, out: str) -> list[tuple[list[str], str, int, int]]:
    """(command line before the flag, flag, low, high) for every integer flag of every subcommand."""
    train = ["train", "--game", "tic_tac_toe", "--run-dir", good]
    evaluate = ["eval", "--run-dir", good, "--opponent", "random"]
    return [
        ([], "--devices", 1, MAX_DEVICES),
        (train, "--num-processes", 1, MAX_COUNT),
        (train, "--process-id", 0, MAX_COUNT),
        (["play", "--run-dir", good], "--step", 0, MAX_COUNT),
        (["play", "--run-dir", good], "--simulations", 1, MAX_SIMULATIONS),
        (["play", "--run-dir", good], "--seed", 0, MAX_SEED),
        (evaluate, "--step", 0, MAX_COUNT),
        (evaluate, "--simulations", 0, MAX_SIMULATIONS),
        (evaluate, "--games", 1, MAX_COUNT),
        (evaluate, "--opening-plies", 0, MAX_COUNT),
        (evaluate, "--batch-size", 1, MAX_COUNT),
        (evaluate, "--seed", 0, MAX_SEED),
        (["ladder", good], "--games", 1, MAX_COUNT),
        (["ladder", good], "--simulations", 0, MAX_SIMULATIONS),
        (["ladder", good], "--seed", 0, MAX_SEED),
        (["bench", "--game", "tic_tac_toe"], "--repeats", 1, MAX_COUNT),
        (["bench", "--game", "tic_tac_toe"], "--devices", 1, MAX_DEVICES),
        (["render", "--record", out + "/r.json", "--out", out + "/x.svg"], "--ply", 0, MAX_COUNT),
        (["sweep", spec, "--platform", "cpu"], "--parallel", 1, MAX_COUNT),
    ]


def bad_command_lines(rng: random.Random, good: str, spec: str, out: str) -> list[list[str]]:
    lines = []
    for before, flag, low, high in number_flags(good, spec, out):
        for value in bad_numbers(low, high):
            option = f"{flag}={value}"  # (`--flag VALUE` would read a VALUE like -1 as another flag)
            # the global --devices comes before the subcommand
            lines.append([*before, option] if before else [option, "train", "--game", "tic_tac_toe", "--run-dir", good])
    structural = [
        [],
        ["trian"],
        ["--version"],
        ["train", "--gaem", "tic_tac_toe"],
        ["play"],
        ["play", "--run-dir", good, "--first", "robot"],
        ["eval", "--run-dir", good],
        ["eval", "--opponent", "random"],
        ["eval", "--run-dir", good, "--player", "random", "--opponent", "random"],
        ["ladder"],
        ["render", "--out", out + "/x.svg"],
        ["render", "--record", out + "/r.json", "--game", "chess", "--out", out + "/x.svg"],
        ["render", "--game", "chess"],
        ["sweep"],
        ["train", "--set"],
        ["train", "--run-dir"],
        ["train", "--run-dir", ""],
        ["train", "--run-dir", "runs/\x00"],
        ["sweep", "a\x00.json"],
        ["ladder", "\x00"],
        ["render", "--record", "a.sgf", "--out", "\x00.svg"],
    ]
    pool = ["train", "play", "eval", "ladder", "bench", "sweep", "render", "--game", "chess", "--set", "x=1", "-1"]
    pool += ["--run-dir", good, "--seed", "--games", "7", "", "--", "-", "--help=1", "\x00", "é"]
    junk = [[*rng.sample(pool, rng.randint(1, 5)), f"--zz-{rng.randrange(10**6)}"] for _ in range(120)]
    return lines + structural + [rng.sample(line, len(line)) for line in junk]


# --- config overrides ------------------------------------------------------------------------------------------------
INT_KEYS = ["num_blocks", "num_channels", "num_simulations", "selfplay_batch_size", "batch_size", "replay_capacity"]
FLOAT_KEYS = ["c_init", "dirichlet_alpha", "weight_decay", "learning_rates", "momentum", "root_exploration_fraction"]


def bad_overrides(rng: random.Random) -> list[list[str]]:
    """`--set` lists (and --game / --preset) that no config accepts."""
    sets = [f"{k}={v}" for k in INT_KEYS for v in ["inf", "nan", "1.5", "abc", "", "1e400", "9" * 5000, "[1]"]]
    sets += [f"{k}={v}" for k in FLOAT_KEYS if k in config_lib.FIELDS for v in ["nan", "inf", "-inf", "1e999", "x"]]
    sets += ["num_simulations=0", "num_simulations=-1", "search=alphabeta", "game=chess", "game=tic_tac_tow"]
    sets += ["num_blocks", "=", "=1", "num_blocks==1", "variant=alphago_zero_", "num_simulation=8"]
    for _ in range(60):
        key = list(config_lib.FIELDS)[rng.randrange(len(config_lib.FIELDS))]
        sets.append(f"{key[: rng.randrange(len(key))]}{rng.choice('_xZ9.')}={rng.randrange(100)}")  # not a key
    lines = [["--set", s] for s in sets]
    lines += [["--preset", p] for p in ["huge", "", "Small", "paper "]]
    lines += [["--game", g] for g in ["tic_tac_tow", "", "go", "chess\x00"]]
    return lines


# --- player specs ----------------------------------------------------------------------------------------------------
def bad_specs(rng: random.Random) -> list[str]:
    numbers = ["nan", "inf", "-inf", "1e999", "-1", "abc", "1.5e", "9" * 5000]
    specs = [f"mcts:{key}={value}" for key in ("sims", "c", "rollouts") for value in numbers]
    specs += [f"mcts:{key}={value}" for key in ("sims", "rollouts") for value in ["0", "1.5", "99999999999999999999"]]
    specs += [f"run:r:sims={v}" for v in ["-1", "abc", "nan", str(MAX_SIMULATIONS + 1)]]
    specs += [f"gnugo:level={v}" for v in ["-1", "abc", "1.5"]] + ["gnugo:lvl=3", "gnugo:x"]
    specs += ["mcts:sims=1,sims=2", "mcts:c=1,sims=5,c=2", "mcts:x=1", "mcts:sims=5:c=1", "mcts:sims=5;c=1"]
    specs += ["mcts:foo", "mcts:sims=", "random:1", "randomm", "", " ", ":", "gtp:", "gtp:gnugo --mode gtp"]
    specs += ["uci:stockfish", "uci:", "run:", "run:@3", "run:/nonexistent/az_jax_run", "MCTS:sims=4", "mcts;sims=4"]
    letters = "abcdefghijklmnopqrstuvwxyz=:,@ 0123456789"
    specs += ["".join(rng.choice(letters) for _ in range(rng.randint(1, 12))) + "~" for _ in range(40)]
    return specs


# --- config.json files -----------------------------------------------------------------------------------------------
def bad_config_files(rng: random.Random) -> list[bytes | None]:
    """Contents of a run dir's config.json that no run may resume (None: config.json is a directory)."""
    good = json.loads(presets_lib.preset("tic_tac_toe").to_json())
    text = json.dumps(good)
    files: list[bytes | None] = [None, b"", b"\xff\xfe{}", text.encode("utf-16"), text.encode()[:-1]]
    files += [text.encode()[: rng.randrange(1, len(text) - 1)] for _ in range(20)]
    files += [json.dumps(v).encode() for v in ([], [good], 5, "config", None, True)]
    files += [("[" * 100_000).encode(), b"{" + b'"a":{' * 5000]
    # A resumable key may take another valid value, and "game" another game: both are left out. Any other key's
    # value below is either not accepted by the config or differs from the run's (another run): both refused.
    numeric = [None, "abc", [1], {"a": 1}, math.nan, math.inf, -math.inf, "1e999"]
    for key in sorted(set(good) - config_lib.RESUMABLE_KEYS - {"game"}):
        kind = type(good[key])
        value = rng.choice(numeric if kind in (int, float) else [{"a": 1}, ["not", "valid"], None])
        files.append(json.dumps({**good, key: value}).encode())
    files += [json.dumps({**good, "colour": "blue"}).encode(), json.dumps({**good, "game": "connect_four"}).encode()]
    files += [json.dumps({**good, "num_blocks": good["num_blocks"] + 1}).encode()]  # another run's network
    junk = bytes(rng.randrange(256) for _ in range(200))
    files += [b"\x80" + junk, junk + b"\xc3"]
    return files


# --- game records ----------------------------------------------------------------------------------------------------
PGN_GAME = ['[Event "fuzz"]', '[White "a"]', '[Black "b"]', "", "1. e4 e5 2. Nf3 Nc6", "3. Bb5 a6 4. Ba4 Nf6 1-0"]
PGN_JUNK = ["hello", "xx", "e9", "Qz5", "Kk", "<m>", "z1", "&", "Nf", "e4!!!x", "{", "[Event"]


def bad_pgns(rng: random.Random) -> list[str]:
    texts = ["", "not a pgn", "%%%", "\x00\x01", '[Event "x"\n\n1. e4', "1. e4 )", "[Event x]\n\n1. e4 e5"]
    for _ in range(50):  # a junk word in the movetext
        lines = list(PGN_GAME)
        line = rng.choice([4, 5])
        words = lines[line].split()
        words.insert(rng.randrange(len(words) + 1), rng.choice(PGN_JUNK[:-2]))
        lines[line] = " ".join(words)
        texts.append("\n".join(lines))
    sans = ["Ke2", "Qh5", "O-O", "Nd5", "Bc4", "e5", "d4", "Kf7", "Rxa8", "exd5", "Qd8", "Ng5", "h8=Q"]
    for _ in range(40):  # a move that is not legal where it stands
        board, moves = chess.Board(), "e4 e5 Nf3 Nc6 Bb5 a6 Ba4 Nf6".split()
        ply = rng.randrange(len(moves))
        for san in moves[:ply]:
            board.push_san(san)
        illegal = [s for s in sans if not _legal(board, s)]
        moves[ply] = rng.choice(illegal)
        texts.append("\n".join(PGN_GAME[:4] + [" ".join(moves)]))
    texts += ["\n".join(PGN_GAME[:1] + [rng.choice(PGN_JUNK[-2:]) + " broken"] + PGN_GAME[1:]) for _ in range(5)]
    return texts


def _legal(board: chess.Board, san: str) -> bool:
    try:
        board.parse_san(san)
    except ValueError:
        return False
    return True


def bad_sgfs(rng: random.Random) -> list[str]:
    texts = ["", "junk", "(;", "(;SZ[9]", "(;FF[4]SZ[7];B[aa])", "(;SZ[abc];B[aa])", "(;SZ[99];B[aa])"]
    texts += ["(;SZ[9]AB[aa];B[bb])", "(;SZ[9]HA[x];B[aa])", "(;SZ[9]HA[2];B[aa])", "(;SZ[9];B[aa];B[bb])"]
    texts += ["(;SZ[9];W[aa])", "(;SZ[9];C[no move])", "(;SZ[9];B[a])", '(;SZ[9]GC[az_jax {"first_player": 5}])']
    texts += ['(;SZ[9]GC[az_jax {"meta": 3}];B[aa])', "(;SZ[9]GC[az_jax [1]];B[aa])", "(;SZ[9]GC[az_jax {];B[aa])"]
    for _ in range(60):  # a point off the board somewhere in a game
        size = rng.choice([9, 19])
        points = ["".join(rng.choice("abcdefghi") for _ in range(2)) for _ in range(rng.randint(1, 8))]
        points[rng.randrange(len(points))] = rng.choice(["zz", "jz", "za", "s" + "{", "A1", "a", "abc", "k?"])
        nodes = "".join(f";{'BW'[i % 2]}[{p}]" + "\n" * rng.randint(0, 1) for i, p in enumerate(points))
        texts.append(f"(;FF[4]SZ[{size}]{nodes})")
    return texts


def bad_jsons(rng: random.Random) -> list[str]:
    good = {"game": "tic_tac_toe", "players": ["x", "o"], "result": 1, "first_player": 0, "meta": {}, "actions": [4]}
    wrong: dict[str, list] = {
        "game": [5, [], None, "tic_tac_tow", ""],
        "result": ["1", True, 2, 0.5, None],
        "first_player": [2, "0", 0.5, True, -1],
        "players": ["ab", ["a"], [1, 2], None, ["a", "b", "c"]],
        "meta": [[], {"k": []}, "x", {"k": {"a": 1}}, 5],
        "moves": ["e4", [1], {"a": 1}, None, 5],
        "actions": [[1.5], "1", [True], {"a": 1}, None],
    }
    texts = [json.dumps({**good, key: value}) for key, values in wrong.items() for value in values]
    texts += [
        json.dumps({k: v for k, v in good.items() if k != "game"}),
        "[]",
        "5",
        '"x"',
        "null",
        "",
        "{",
        "[" * 10**5,
    ]
    texts += [json.dumps(good)[: rng.randrange(1, 60)] for _ in range(20)]
    texts += ['{"game": "tic_tac_toe", "result": NaN}', '{"game": "tic_tac_toe", "result": Infinity}']
    return texts


def bad_records(rng: random.Random) -> list[tuple[str, str]]:
    """(file extension, text) of records that do not parse."""
    return (
        [(".pgn", t) for t in bad_pgns(rng)]
        + [(".sgf", t) for t in bad_sgfs(rng)]
        + [(".json", t) for t in bad_jsons(rng)]
    )


# --- the test --------------------------------------------------------------------------------------------------------
@pytest.mark.usefixtures("no_work")
def test_generated_invalid_input_is_one_line_exit_2(tmp_path):
    rng = random.Random(SEED)
    good = fake_run_dir(tmp_path / "good")
    before = tree_hash(good)
    out = str(tmp_path / "out")
    os.makedirs(out)
    spec = os.path.join(out, "spec.json")
    with open(spec, "w") as f:
        json.dump({"game": "tic_tac_toe", "num_samples": "3"}, f)
    with open(os.path.join(out, "r.json"), "w") as f:
        f.write('{"game": 5}')

    invocations = bad_command_lines(rng, good, spec, out)
    train = ["train", "--game", "tic_tac_toe", "--no-progress"]
    for i, extra in enumerate(bad_overrides(rng)):
        if extra[0] == "--game":
            invocations += [["train", *extra, "--run-dir", os.path.join(out, f"run{i}")], ["bench", *extra]]
            continue
        invocations.append([*train, "--run-dir", good if i % 2 else os.path.join(out, f"run{i}"), *extra])
        if i % 5 == 0:
            invocations.append(["bench", "--game", "tic_tac_toe", *extra])
    for spec_text in bad_specs(rng):
        with pytest.raises((players.PlayerSpecError, CheckpointError)):
            players.make_player(spec_text, "tic_tac_toe")
        invocations.append(["eval", "--player", "random", "--game", "tic_tac_toe", "--opponent", spec_text])
        invocations[-1] += ["--out-dir", os.path.join(out, "eval")]
    for i, content in enumerate(bad_config_files(rng)):
        run_dir = os.path.join(out, f"config{i}")
        os.makedirs(run_dir)
        if content is None:
            os.makedirs(os.path.join(run_dir, "config.json"))
        else:
            with open(os.path.join(run_dir, "config.json"), "wb") as f:
                f.write(content)
        invocations.append([*train, "--run-dir", run_dir])
    for i, (ext, text) in enumerate(bad_records(rng)):
        with pytest.raises(records.RecordError):
            {".pgn": records.from_pgn, ".sgf": records.from_sgf, ".json": records.from_json}[ext](text)
        path = os.path.join(out, f"record{i}{ext}")
        with open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(text)
        invocations.append(["render", "--record", path, "--out", os.path.join(out, f"record{i}.svg")])

    assert len(invocations) >= 1000
    for argv in invocations:
        code, err = in_process(argv)
        assert code == 2 and len(err) == 1 and err[0].startswith("az-jax: error: "), (argv, code, err)
    assert tree_hash(good) == before
    assert not [name for name in os.listdir(out) if name.endswith(".svg")]  # no picture of a bad record

"""Move notation and text boards (envs/notation/) for every game, and the terminal play session
(az_jax/apps/terminal.py).

Positions come from one jitted random playout per game (`_runner`: init + a scan of env.step, so each game compiles
once); moves can be forced into the playout to check hand-written lines against pgx's own FEN / SFEN writers.
"""

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from az_jax.apps.terminal import play_session
from az_jax.core import networks
from az_jax.core.overrides import override
from az_jax.core.presets import preset
from az_jax.runtime.agent import Agent
from envs import GAMES, make_env
from envs import notation as nt

# Programs that compile for far longer than they run: XLA's optimisation passes off (conftest.py).
pytestmark = pytest.mark.usefixtures("fast_compiles")

# Plies of random play per game (chess and shogi compile slowly: one short game each).
PLIES = {
    "tic_tac_toe": 9,
    "connect_four": 24,
    "othello": 40,
    "hex": 30,
    "go_9x9": 40,
    "go_19x19": 24,
    "chess": 30,
    "gardner_chess": 30,
    "shogi": 30,
    "animal_shogi": 30,
}


@functools.cache
def _runner(game: str):
    """jit((key, forced [plies]) -> (states [plies + 1, ...], actions [plies])): random legal play from env.init,
    except that forced[i] >= 0 is played at ply i."""
    env, _ = make_env(game)

    def run(key, forced):
        init_key, play_key = jax.random.split(key)
        start = env.init(init_key)

        def ply(state, xs):
            k, f = xs
            random = jax.random.categorical(k, jnp.where(state.legal_action_mask, 0.0, -jnp.inf))
            action = jnp.where(f >= 0, f, random).astype(jnp.int32)
            state = env.step(state, action)
            return state, (state, action)

        _, (states, actions) = jax.lax.scan(ply, start, (jax.random.split(play_key, PLIES[game]), forced))
        return jax.tree.map(lambda a, b: jnp.concatenate([jnp.asarray(a)[None], b]), start, states), actions

    return jax.jit(run)


def _playout(game: str, forced: tuple[int, ...] = (), seed: int = 7):
    """(host states, actions) of one playout; states[i] is the position before actions[i]."""
    f = np.full(PLIES[game], -1, np.int32)
    f[: len(forced)] = forced
    states, actions = jax.device_get(_runner(game)(jax.random.key(seed), jnp.asarray(f)))
    return [jax.tree.map(lambda x, i=i: x[i], states) for i in range(PLIES[game] + 1)], [int(a) for a in actions]


@functools.cache
def _random_game(game: str):
    return _playout(game)


def _line(game: str, moves: list[str]) -> list:
    """The positions along a line of moves typed in notation (each parsed in the position it is played in)."""
    actions: list[int] = []
    for text in moves:
        states, _ = _playout(game, tuple(actions))
        actions.append(nt.parse_move(game, states[len(actions)], text))
    return _playout(game, tuple(actions))[0][: len(moves) + 1]


def _live(states) -> list:
    return [s for s in states if not (bool(s.terminated) or bool(s.truncated))]


def _first_to_move(game, state) -> bool:
    return nt.side_to_move(game, state) == nt.player_names(game)[0]


def _check_effect(game: str, before, after, move: str) -> None:
    """The move did on the board what its text says (placed stone, moved / promoted / dropped piece)."""
    first = _first_to_move(game, before)
    if game in ("tic_tac_toe", "othello", "hex", "go_9x9", "go_19x19"):
        if move in ("pass", "swap"):
            return
        assert nt._cell(game, before, move) == "."
        assert nt._cell(game, after, move) == ("X" if first else "O"), (game, move)
    elif game in ("chess", "gardner_chess"):
        src, dst, promo = move[:2], move[2:4], move[4:]
        piece = nt._cell(game, before, src)
        assert piece != "." and (piece.isupper() == first)
        expected = (promo.upper() if first else promo) if promo else piece
        assert (nt._cell(game, after, src), nt._cell(game, after, dst)) == (".", expected), (game, move)
    elif game == "shogi":
        if "*" in move:
            assert nt._cell(game, after, move[2:]) == (move[0] if first else move[0].lower())
            return
        piece = nt._cell(game, before, move[:2])
        expected = "+" + piece if move.endswith("+") else piece
        assert (nt._cell(game, after, move[:2]), nt._cell(game, after, move[2:4])) == (".", expected), move
    elif game == "animal_shogi":
        if "*" in move:
            assert nt._cell(game, after, move[2:]) == (move[0] if first else move[0].lower())
            return
        piece = nt._cell(game, before, move[:2])
        far = move[3] == ("4" if first else "1")
        expected = {"C": "H", "c": "h"}.get(piece, piece) if far else piece
        assert (nt._cell(game, after, move[:2]), nt._cell(game, after, move[2:4])) == (".", expected), move


def test_every_registry_game_has_a_notation():
    assert set(GAMES) <= set(nt.NOTATION_GAMES)


@pytest.mark.parametrize("game", list(GAMES))
def test_round_trip_on_random_positions(game):
    states, actions = _random_game(game)
    live = _live(states)
    assert live, "the playout has positions to check"
    for state in live:
        mask = np.asarray(state.legal_action_mask)
        moves = nt.legal_moves(game, state)
        assert len(moves) == int(mask.sum()), "formats of legal moves are distinct"
        assert all(mask[a] for a in moves.values())
        for text, action in moves.items():
            assert nt.format_move(game, state, action) == text
            assert nt.parse_move(game, state, text) == action, (game, text)
            assert nt.parse_move(game, state, f"  {text.swapcase()} ") == action, "case and spaces are ignored"
        board = nt.render(game, state)
        assert nt.side_to_move(game, state) in board.splitlines()[-1]
    for before, after, action in zip(states, states[1:], actions):
        if not (bool(before.terminated) or bool(before.truncated)):
            _check_effect(game, before, after, nt.format_move(game, before, action))
    finished = [s for s in states if bool(s.terminated)]
    if finished:
        assert "game over" in nt.render(game, finished[0]).splitlines()[-1]
        assert nt.legal_moves(game, finished[0]) == {}


# --- hand-checked cases ----------------------------------------------------------------------------------------------


def test_tic_tac_toe_cells():
    start = _random_game("tic_tac_toe")[0][0]
    assert nt.parse_move("tic_tac_toe", start, "5") == 4
    assert nt.parse_move("tic_tac_toe", start, "1") == 0 and nt.parse_move("tic_tac_toe", start, "9") == 8
    after = _line("tic_tac_toe", ["5", "1"])
    assert nt._cell("tic_tac_toe", after[2], "5") == "X" and nt._cell("tic_tac_toe", after[2], "1") == "O"
    assert nt.render("tic_tac_toe", after[2]).splitlines()[0] == " O | 2 | 3"
    with pytest.raises(ValueError, match="illegal"):
        nt.parse_move("tic_tac_toe", after[2], "5")
    won = _line("tic_tac_toe", ["1", "4", "2", "5", "3"])[-1]
    assert nt.render("tic_tac_toe", won).splitlines()[-1] == "game over: X wins"


def test_connect_four_columns():
    start = _random_game("connect_four")[0][0]
    assert nt.parse_move("connect_four", start, "4") == 3
    assert nt.format_move("connect_four", start, 6) == "7"
    after = _line("connect_four", ["4", "4", "4"])[3]
    rows = nt.render("connect_four", after).splitlines()
    assert rows[0] == " 1 2 3 4 5 6 7" and rows[6] == " . . . X . . ." and rows[4] == " . . . X . . ."


def test_othello_standard_opening():
    start = _random_game("othello")[0][0]
    assert set(nt.legal_moves("othello", start)) == {"d3", "c4", "f5", "e6"}  # Black's four first moves
    assert [nt._cell("othello", start, sq) for sq in ("d4", "e5", "d5", "e4")] == ["O", "O", "X", "X"]
    after = _line("othello", ["f5"])[1]
    assert nt._cell("othello", after, "e5") == "X"  # flipped
    assert set(nt.legal_moves("othello", after)) == {"d6", "f4", "f6"}  # White's replies


def test_hex_cells_and_swap():
    start = _random_game("hex")[0][0]
    assert nt.parse_move("hex", start, "a1") == 0 and nt.parse_move("hex", start, "k11") == 120
    assert nt.parse_move("hex", start, "b1") == 1 and nt.parse_move("hex", start, "a2") == 11
    with pytest.raises(ValueError, match="illegal"):
        nt.parse_move("hex", start, "swap")
    first, swapped = _line("hex", ["b1", "swap"])[1:]
    assert nt.parse_move("hex", first, "swap") == 121
    assert nt._cell("hex", swapped, "b1") == "." and nt._cell("hex", swapped, "a2") == "O"  # mirrored, O's now


def test_go_vertices():
    start = _random_game("go_9x9")[0][0]
    assert nt.parse_move("go_9x9", start, "A9") == 0  # pgx row 0 is the top row
    assert nt.parse_move("go_9x9", start, "j1") == 80
    assert nt.parse_move("go_9x9", start, "E5") == 40
    assert nt.parse_move("go_9x9", start, "pass") == 81 and nt.format_move("go_9x9", start, 81) == "pass"
    with pytest.raises(ValueError, match="malformed"):
        nt.parse_move("go_9x9", start, "I5")  # GTP skips the letter I
    after = _line("go_9x9", ["D4"])[1]
    assert nt._cell("go_9x9", after, "D4") == "X"
    big = _random_game("go_19x19")[0][0]
    assert nt.parse_move("go_19x19", big, "T19") == 18 and nt.parse_move("go_19x19", big, "A1") == 342


def test_chess_uci_against_pgx_fen():
    from pgx.experimental.chess import to_fen

    line = _line("chess", ["e2e4", "e7e5", "g1f3"])
    assert to_fen(line[0]) == "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1"
    assert to_fen(line[1]) == "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq e3 0 1"
    assert to_fen(line[2]) == "rnbqkbnr/pppp1ppp/8/4p3/4P3/8/PPPP1PPP/RNBQKBNR w KQkq e6 0 2"
    assert to_fen(line[3]) == "rnbqkbnr/pppp1ppp/8/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R b KQkq - 1 2"
    assert len(nt.legal_moves("chess", line[0])) == 20
    assert nt.format_move("chess", line[1], nt.parse_move("chess", line[1], "E7E5")) == "e7e5"


def test_chess_legal_moves_match_python_chess():
    chess = pytest.importorskip("chess")
    from pgx.experimental.chess import to_fen

    for state in _live(_random_game("chess")[0]):
        board = chess.Board(to_fen(state))
        assert set(nt.legal_moves("chess", state)) == {m.uci() for m in board.legal_moves}, to_fen(state)


def test_gardner_chess_against_pgx_fen():
    line = _line("gardner_chess", ["b2b3", "c4b3"])
    assert [s._to_fen() for s in line] == [
        "rnbqk/ppppp/5/PPPPP/RNBQK w - - 0 1",
        "rnbqk/ppppp/1P3/P1PPP/RNBQK b - - 0 1",
        "rnbqk/pp1pp/1p3/P1PPP/RNBQK w - - 0 2",
    ]


def test_shogi_usi_against_pgx_sfen():
    from pgx.experimental.shogi import to_sfen

    line = _line("shogi", ["7g7f", "3c3d", "8h2b+", "3a2b", "B*5e"])
    assert [to_sfen(s) for s in line] == [
        "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1",
        "lnsgkgsnl/1r5b1/ppppppppp/9/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL w - 2",
        "lnsgkgsnl/1r5b1/pppppp1pp/6p2/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL b - 3",
        "lnsgkgsnl/1r5+B1/pppppp1pp/6p2/9/2P6/PP1PPPPPP/7R1/LNSGKGSNL w B 4",
        "lnsgkg1nl/1r5s1/pppppp1pp/6p2/9/2P6/PP1PPPPPP/7R1/LNSGKGSNL b Bb 5",
        "lnsgkg1nl/1r5s1/pppppp1pp/6p2/4B4/2P6/PP1PPPPPP/7R1/LNSGKGSNL w b 6",
    ]
    assert len(nt.legal_moves("shogi", line[0])) == 30
    assert nt.parse_move("shogi", line[4], "b*5e") == nt.parse_move("shogi", line[4], "B*5E")
    with pytest.raises(ValueError, match="illegal"):
        nt.parse_move("shogi", line[4], "8h2b")  # the bishop is gone from 8h


def test_animal_shogi_squares():
    start = _random_game("animal_shogi")[0][0]
    assert set(nt.legal_moves("animal_shogi", start)) == {"b2b3", "b1a2", "b1c2", "c1c2"}
    assert [nt._cell("animal_shogi", start, sq) for sq in ("a1", "b1", "c1", "b2", "b3", "b4")] == [
        "E",
        "L",
        "G",
        "C",
        "c",
        "l",
    ]
    line = _line("animal_shogi", ["b2b3", "b4b3", "C*b2"])
    assert nt._cell("animal_shogi", line[1], "b3") == "C"
    assert nt._cell("animal_shogi", line[2], "b3") == "l"
    assert nt._cell("animal_shogi", line[3], "b2") == "C"


MALFORMED = {
    "tic_tac_toe": ["", "0", "10", "x", "5 5"],
    "connect_four": ["0", "8", "d", "44"],
    "othello": ["i1", "a9", "d", "d33", "swap"],
    "hex": ["l1", "a12", "a0", "pass"],
    "go_9x9": ["I5", "K5", "A10", "pas", "resign"],
    "go_19x19": ["U1", "A20", "I1", "A0"],
    "chess": ["e2", "e2e9", "i2i4", "e7e8k", "O-O", "Nf3"],
    "gardner_chess": ["a1a6", "f1f2", "a2"],
    "shogi": ["7g7", "0g7f", "7j7f", "K*5e", "P*", "7g7f=", "P5e"],
    "animal_shogi": ["d1d2", "b5b4", "L*a2", "H*a2", "b2"],
}


@pytest.mark.parametrize("game", list(GAMES))
def test_malformed_and_illegal_input_raise_value_error(game):
    states = _live(_random_game(game)[0])
    state = states[min(2, len(states) - 1)]
    for text in MALFORMED[game]:
        with pytest.raises(ValueError, match="malformed"):
            nt.parse_move(game, state, text)
    legal = nt.legal_moves(game, state)
    checked = 0
    for action in np.flatnonzero(~np.asarray(state.legal_action_mask)):
        try:
            text = nt.format_move(game, state, int(action))
        except ValueError:
            continue  # not a move at all (e.g. a chess plane off the board)
        if text in legal or text + "q" in legal:  # shogi: another piece makes it; chess: "e7e8" = "e7e8q"
            continue
        checked += 1
        if checked > 40:
            break
        with pytest.raises(ValueError, match="illegal"):
            nt.parse_move(game, state, text)


def test_errors_for_unknown_game_and_batched_state():
    state = _random_game("tic_tac_toe")[0][0]
    with pytest.raises(ValueError, match="no notation"):
        nt.render("backgammon", state)
    batched = jax.tree.map(lambda x: np.asarray(x)[None], state)
    with pytest.raises(ValueError, match="unbatched"):
        nt.parse_move("tic_tac_toe", batched, "5")


# --- play_session ----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def agent():
    cfg = override(
        preset("tic_tac_toe", "small"), ["num_blocks=1", "num_channels=8", "value_hidden=8", "num_simulations=16"]
    )
    network = networks.make_network(cfg, 9)
    # An "rbg" key: XLA compiles the threefry initialisers of even this tiny net for ~7 CPU seconds, rbg in ~2.
    init = jax.jit(lambda key: network.init(key, jnp.zeros((1, 3, 3, 2)), train=False))
    variables = init(jax.random.key(0, impl="rbg"))
    return Agent(config=cfg, variables=variables)


def _scripted(answers):
    """input_fn answering from `answers`, recording the prompts."""
    prompts = []
    it = iter(answers)

    def input_fn(prompt):
        prompts.append(prompt)
        return next(it)

    return input_fn, prompts


@pytest.mark.parametrize("human_first", [True, False])
def test_play_session_plays_a_full_game(agent, human_first):
    input_fn, prompts = _scripted(itertools.chain(["x", "10", "moves"], itertools.cycle("123456789")))
    printed = []
    result = play_session(
        agent,
        human_first=human_first,
        num_simulations=8,
        seed=3,
        input_fn=input_fn,
        print_fn=lambda *a: printed.append(" ".join(map(str, a))),
    )
    text = "\n".join(printed)
    assert result in (-1.0, 0.0, 1.0)
    assert "Error: malformed move 'x'" in text and "Error: malformed move '10'" in text
    assert "Legal now: " in text
    assert "game over" in text
    assert {"You win.": 1.0, "You lose.": -1.0, "Draw.": 0.0}[printed[-1]] == result
    agent_lines = [line for line in printed if line.startswith("Agent (")]
    assert agent_lines and all("value " in line and "visits: " in line for line in agent_lines)
    assert all(p.startswith("Your move (") for p in prompts)
    human_side = "X" if human_first else "O"
    assert all(p == f"Your move ({human_side}): " for p in prompts)
    if not human_first:
        assert printed.index(next(line for line in printed if line.startswith("Agent ("))) < next(
            i for i, line in enumerate(printed) if "Error" in line
        )


@pytest.mark.parametrize("answer", ["quit", EOFError])
def test_play_session_quit_and_eof(agent, answer):
    def input_fn(prompt):
        if answer is EOFError:
            raise EOFError
        return answer

    printed = []
    assert play_session(agent, human_first=True, input_fn=input_fn, print_fn=printed.append) == 0.0
    assert printed[-1] == "Session ended."

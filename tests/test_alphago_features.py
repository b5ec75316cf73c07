"""AlphaGo's input features (az_jax/alphago/features.py; Silver et al., Nature 2016, Extended Data Table 2) on
hand-made 9×9 positions whose values are worked out in the comments, on real pgx games (orientation, move ages, ko,
legality against pgx's own legal mask), and against a plain-Python oracle of the chain and move planes.

Boards are drawn with X = the player to move, O = the opponent, rows top to bottom (row r, column c is point
r * 9 + c, as pgx numbers them). Cost: one compile of `features(·, 49)` for the whole batch of positions (a
module-scoped fixture), one of `features` for a single unbatched position, four small ones (4, 12, 20 planes and
20 in bfloat16, no ladders), one pgx scan; XLA's optimisation passes off throughout.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pgx
import pytest

from az_jax.alphago import features as F
from az_jax.alphago.position import Position, from_pgx

from conftest import fast_compiles_here

N = 9
# Programs that compile for far longer than they run: XLA's optimisation passes off (conftest.py), and one jitted
# function per plane count, so that each input shape compiles once.
pytestmark = pytest.mark.usefixtures("fast_compiles")
FEATURES_49 = jax.jit(lambda p: F.features(p, F.NUM_VALUE_PLANES))
FEATURES_48 = jax.jit(F.features)

# --- hand-made positions --------------------------------------------------------------------------------------------

BOARDS = {
    # O (0,0): liberty (1,0) only -> 1. X (0,1): (0,2), (1,1) -> 2. O (0,8): (0,7), (1,8) -> 2.
    # X (4,3)-(4,6), four in a row: 4 above + 4 below + (4,2) + (4,7) = 10 -> the ">= 8" plane.
    "liberties": """
        OX......O
        .........
        .........
        .........
        ...XXXX..
        .........
        .........
        .........
        .........
    """,
    # X (0,5) takes O (0,3)-(0,4), whose only liberty it is: capture size 2; its liberties then: (0,4) (freed),
    # (0,6), (1,5) -> 3. X (8,4) takes O (8,3) (1 stone) and O (8,5)-(8,6) (2 stones), both with (8,4) as their only
    # liberty: capture size 1 + 2 = 3; liberties after: (7,4), (8,3), (8,5) -> 3.
    "captures": """
        ..XOO....
        ...XX....
        .........
        .........
        .........
        .........
        .........
        ...X.XX..
        ..XO.OOXX
    """,
    # X (4,2) joins X (4,0)-(4,1) (liberties (4,2), (5,1)) under O (3,2), beside O (4,3) and O (5,2): the new
    # 3-stone chain has one liberty, (5,1): self-atari size 3. X (2,6) joins X (2,5) and X (2,7): the 3-stone chain
    # has (1,6), (1,7), (2,4), (2,8), (3,5), (3,6), (3,7) -> 7 liberties ((1,5) is O).
    "self_atari_and_merge": """
        .........
        .....O...
        .....X.X.
        OOO......
        XX.O.....
        O.O......
        .........
        .........
        .........
    """,
    # O (4,4) has 2 liberties, (4,5) and (5,4). X (4,5) starts a ladder running down and left to the edge (O
    # extends to (5,4), X plays (6,4), O (5,3), X (5,2), ...): captured. X (5,4) starts the mirror ladder up and right:
    # captured. No other point is a ladder capture.
    "ladder": """
        .........
        .........
        .........
        ....X....
        ...XO....
        .....X...
        .........
        .........
        .........
    """,
    # The same with an O ladder breaker at (7,1) on the down-left path: X (4,5) no longer captures (O extends into
    # it), X (5,4) (the up-right ladder) still does.
    "ladder_breaker": """
        .........
        .........
        .........
        ....X....
        ...XO....
        .....X...
        .........
        .O.......
        .........
    """,
    # The defender's turn after the ladder's first atari (colours swapped: X is now the chased stone, in atari with
    # its last liberty at (5,4)). Extending there leaves 2 liberties and the ladder still works: no escape.
    "ladder_defender": """
        .........
        .........
        .........
        ....O....
        ...OXO...
        .....O...
        .........
        .........
        .........
    """,
    # The same with the X breaker at (7,1): extending at (5,4) escapes.
    "ladder_defender_breaker": """
        .........
        .........
        .........
        ....O....
        ...OXO...
        .....O...
        .........
        .X.......
        .........
    """,
    # A fork. X (0,5): O (0,4) extends to (0,3), liberties (0,2), (1,3); both look alike (X safe, O to 2 liberties).
    # The lower point, X (0,2), fails: O (1,3) then reaches O (2,1)-(2,2) whichever side X plays. X (1,3), read
    # as the second line, works: O (0,2) -> (0,1), (1,2); X (1,2); O (0,1) -> (0,0), (1,1); X (1,1) ((0,0) would
    # be a lone stone with 1 liberty); O (0,0) has 1 liberty: captured. X (0,3) captures at once: O (0,4)-(0,5) has
    # only (0,6).
    "ladder_fork": """
        ....O....
        ....XX...
        .OO......
        .........
        .........
        .........
        .........
        .........
        .........
    """,
    # The defender may take an attacker chain next to the prey. O (4,4)-(4,5) has 2 liberties, (4,6) and (5,5).
    # After X (4,6), O's best answer is (3,6), taking X (3,4)-(3,5) (in atari, its liberty (3,6)): the prey then
    # has (3,4), (3,5), (5,5), 3 liberties (extending at (5,5) would give only (5,6), (6,5)). After X (5,5), O
    # extends at (4,6): (3,6), (4,7), (5,6), 3 liberties. So no ladder capture; and X (3,6), extending X (3,4)-(3,5)
    # out of atari, gets (2,6), (3,7), (4,6): 3 liberties, an escape.
    "ladder_take": """
        .........
        .........
        ....OO...
        ...OXX...
        ...XOO...
        ....X....
        .........
        .........
        .........
    """,
    # X (4,4) in atari (liberty (5,4)); extending there gives (5,3), (5,5), (6,4): 3 liberties, an escape at once.
    "escape_open": """
        .........
        .........
        .........
        ....O....
        ...OXO...
        .........
        .........
        .........
        .........
    """,
    # Eyes. (0,0): corner surrounded by X, diagonal (1,1) X -> own eye, not sensible (but legal).
    # (4,4): X on all four sides, one O diagonal (3,3) in the middle of the board -> still an eye, not sensible.
    # (4,7): X on all four sides, two O diagonals (3,6), (5,8) -> a false eye, sensible.
    # (8,4): edge point, X on (8,3), (8,5), (7,4), one O diagonal (7,3) -> a false eye on the edge, sensible.
    # (8,8): corner between O (8,7) and O (7,8), of the chain (7,7), (7,8), (8,7) with liberties (6,7), (6,8),
    # (7,6), (8,6), (8,8): X there captures nothing and has no liberty -> suicide, illegal.
    # (0,8): corner next to O (0,7), whose only liberty it is (X (0,6), X (1,7)): a capture, legal.
    "eyes": """
        .X....XO.
        XX.....X.
        .........
        ...OX.OX.
        ...X.XX.X
        ....X..XO
        .........
        ...OX..OO
        ...X.X.O.
    """,
}


def position(text: str, ko: int = -1) -> Position:
    rows = [row.strip() for row in text.strip().splitlines()]
    board = np.array([[{"X": 1, "O": -1, ".": 0}[c] for c in row] for row in rows], np.int8).reshape(-1)
    return Position(
        board=jnp.asarray(board),
        turns_since=jnp.asarray(np.where(board != 0, 8, 0).astype(np.int8)),
        ko=jnp.int32(ko),
        black_to_move=jnp.bool_(True),
    )


# --- pgx games ------------------------------------------------------------------------------------------------------

# A ko on pgx's board (r, c -> r * 9 + c): B (0,1), W (0,2), B (1,0), W (1,3), B (2,1), W (2,2), B (8,8), W (1,1),
# B (1,2) takes W (1,1) -> ko at (1,1) = 10 for White, to move.
KO_GAME = [1, 2, 9, 12, 19, 20, 80, 10, 11]
RANDOM_GAMES, PLIES = 4, 40


def pgx_games():
    """Positions and pgx legal masks [PLIES, 1 + RANDOM_GAMES, ...] of the ko game (then random moves) and of random
    games (uniform over legal non-pass moves)."""
    env = pgx.make("go_9x9")
    scripts = np.full((1 + RANDOM_GAMES, PLIES), -1, np.int32)
    scripts[0, : len(KO_GAME)] = KO_GAME

    @jax.jit
    def run(scripts, key):
        state = jax.vmap(env.init)(jax.random.split(key, scripts.shape[0]))

        def step(state, xs):
            script, key = xs
            mask = state.legal_action_mask.at[:, -1].set(False)
            action = jnp.where(script >= 0, script, jax.random.categorical(key, jnp.where(mask, 0.0, -jnp.inf)))
            state = jax.vmap(env.step)(state, action)
            return state, (from_pgx(state), state.legal_action_mask)

        keys = jax.random.split(jax.random.fold_in(key, 1), scripts.shape[1])
        return jax.lax.scan(step, state, (scripts.T, keys))[1]

    return run(jnp.asarray(scripts), jax.random.key(0))


@pytest.fixture(scope="module")
def batch():
    """Every test position in one batch, its 49 planes (one compile), and where each position is in it."""
    with fast_compiles_here():  # tiny programs: compile time dominates
        games, legal = pgx_games()
        # the ko game after its 9 moves; the random games after 20 and 40 plies
        pgx_positions = [jax.tree.map(lambda x: x[len(KO_GAME) - 1, 0], games)]
        pgx_positions += [jax.tree.map(lambda x, p=p, g=g: x[p, g], games) for p in (19, 39) for g in range(1, 5)]
        pgx_legal = [legal[len(KO_GAME) - 1, 0]] + [legal[p, g] for p in (19, 39) for g in range(1, 5)]
        made = [position(text) for text in BOARDS.values()]
        everything = jax.tree.map(lambda *xs: jnp.stack(xs), *made, *pgx_positions)
        planes = np.asarray(FEATURES_49(everything))
        index = {name: i for i, name in enumerate(BOARDS)}
        index.update({"ko_game": len(made)})
        yield {
            "positions": everything,
            "planes": planes,
            "index": index,
            "pgx": list(range(len(made), len(made) + len(pgx_positions))),
            "pgx_legal": np.asarray(jnp.stack(pgx_legal))[:, :-1],
        }


def planes_of(batch, name: str) -> np.ndarray:
    return batch["planes"][batch["index"][name]]


def get(x: np.ndarray, plane: str) -> np.ndarray:
    """[N, N, 49] -> [N, N, k]: one feature's planes."""
    return x[..., F.PLANE_SLICES[plane]]


def value(x: np.ndarray, plane: str, lowest: int) -> np.ndarray:
    """The integer a one-hot feature encodes at each point (`lowest` for its first plane), lowest - 1 where no plane
    is set."""
    p = get(x, plane)
    return np.where(p.any(-1), p.argmax(-1) + lowest, lowest - 1)


def points(mask: np.ndarray) -> set[tuple[int, int]]:
    return {(int(r), int(c)) for r, c in zip(*np.nonzero(mask))}


# --- the plane table ------------------------------------------------------------------------------------------------


def test_plane_table():
    # 3 + 1 + 8 + 8 + 8 + 8 + 8 + 1 + 1 + 1 + 1 = 48, + 1 player colour = 49, contiguous in the paper's order
    assert F.NUM_POLICY_PLANES == 48 and F.NUM_VALUE_PLANES == 49
    assert F.PLANE_SLICES["stone_colour"] == slice(0, 3) and F.PLANE_SLICES["turns_since"] == slice(4, 12)
    assert F.PLANE_SLICES["liberties"] == slice(12, 20) and F.PLANE_SLICES["ladder_capture"] == slice(44, 45)
    assert F.PLANE_SLICES["zeros"] == slice(47, 48) and F.PLANE_SLICES["player_colour"] == slice(48, 49)


# --- pgx games: orientation, move ages, ko, legality ----------------------------------------------------------------


def test_pgx_ko_game_colours_ages_and_ko(batch):
    x = planes_of(batch, "ko_game")
    # White to move: own = White (0,2), (1,3), (2,2); opponent = Black (0,1), (1,0), (2,1), (1,2), (8,8); (1,1) taken
    assert points(get(x, "stone_colour")[..., 0]) == {(0, 2), (1, 3), (2, 2)}
    assert points(get(x, "stone_colour")[..., 1]) == {(0, 1), (1, 0), (2, 1), (1, 2), (8, 8)}
    assert get(x, "stone_colour")[..., 2].sum() == 81 - 8 and get(x, "stone_colour")[1, 1, 2] == 1
    assert get(x, "stone_colour").sum(-1).min() == 1  # one colour plane per point
    assert (get(x, "ones") == 1).all() and (get(x, "zeros") == 0).all()
    assert (get(x, "player_colour") == 0).all()  # White to move
    # move k of 9 was played 10 - k turns ago: (1,2) move 9 -> 1, (8,8) move 7 -> 3, (2,2) 6 -> 4, (2,1) 5 -> 5,
    # (1,3) 4 -> 6, (1,0) 3 -> 7, (0,2) 2 -> 8, (0,1) 1 -> 9, shown as ">= 8"; empty points 0 (no plane)
    ages = value(x, "turns_since", 1)
    expected = {(1, 2): 1, (8, 8): 3, (2, 2): 4, (2, 1): 5, (1, 3): 6, (1, 0): 7, (0, 2): 8, (0, 1): 8}
    assert {p: int(ages[p]) for p in expected} == expected
    assert (ages[get(x, "stone_colour")[..., 2] == 1] == 0).all()
    # the ko point (1,1): White may not retake there; it would take Black (1,2) (in atari: 1 liberty, (1,1))
    assert batch["positions"].ko[batch["index"]["ko_game"]] == 10
    assert value(x, "liberties", 1)[1, 2] == 1
    for plane in ("capture_size", "self_atari_size", "liberties_after_move", "sensibleness"):
        assert get(x, plane)[1, 1].sum() == 0, plane


def test_legality_matches_pgx(batch):
    # capture size has a plane for every legal move (plane 0: captures nothing), so their sum is the legal mask
    for row, legal in zip(batch["pgx"], batch["pgx_legal"]):
        ours = get(batch["planes"][row], "capture_size").sum(-1).reshape(-1)
        np.testing.assert_array_equal(ours, legal)


def test_player_colour_black(batch):
    x = planes_of(batch, "liberties")  # position() sets black_to_move
    assert (get(x, "player_colour") == 1).all()


# --- chains and move planes -----------------------------------------------------------------------------------------


def test_liberties(batch):
    libs = value(planes_of(batch, "liberties"), "liberties", 1)
    assert libs[0, 0] == 1 and libs[0, 1] == 2 and libs[0, 8] == 2
    assert (libs[4, 3:7] == 8).all()  # 10 liberties: the ">= 8" plane
    assert libs[1, 1] == 0  # empty: no plane


def test_capture_size(batch):
    x = planes_of(batch, "captures")
    size = value(x, "capture_size", 0)
    assert size[0, 5] == 2 and size[8, 4] == 3
    assert size[7, 4] == 0 and size[4, 4] == 0  # legal moves that capture nothing: plane 0
    assert points(size > 0) == {(0, 5), (8, 4)}
    after = value(x, "liberties_after_move", 1)
    assert after[0, 5] == 3 and after[8, 4] == 3
    assert size[0, 3] == -1  # a stone: no move plane


def test_self_atari_and_liberties_after_merge(batch):
    x = planes_of(batch, "self_atari_and_merge")
    atari = value(x, "self_atari_size", 1)
    assert atari[4, 2] == 3
    assert value(x, "liberties_after_move", 1)[4, 2] == 1
    assert value(x, "liberties_after_move", 1)[2, 6] == 7 and atari[2, 6] == 0
    # (5,1): X there joins nothing, beside O (5,0), (5,2) and X (4,1): joins X (4,0)-(4,1); liberties (4,2), (6,1)
    assert value(x, "liberties_after_move", 1)[5, 1] == 2


def test_ladder_capture_and_breaker(batch):
    assert points(get(planes_of(batch, "ladder"), "ladder_capture")[..., 0]) == {(4, 5), (5, 4)}
    assert points(get(planes_of(batch, "ladder_breaker"), "ladder_capture")[..., 0]) == {(5, 4)}


def test_ladder_fork(batch):
    assert points(get(planes_of(batch, "ladder_fork"), "ladder_capture")[..., 0]) == {(0, 3), (0, 5)}


def test_ladder_escape(batch):
    assert get(planes_of(batch, "ladder_defender"), "ladder_escape").sum() == 0
    assert points(get(planes_of(batch, "ladder_defender_breaker"), "ladder_escape")[..., 0]) == {(5, 4)}
    assert points(get(planes_of(batch, "escape_open"), "ladder_escape")[..., 0]) == {(5, 4)}
    # the extension is legal and not a ladder capture of anything
    assert get(planes_of(batch, "ladder_defender"), "ladder_capture").sum() == 0


def test_ladder_defender_takes(batch):
    x = planes_of(batch, "ladder_take")
    assert get(x, "ladder_capture").sum() == 0
    assert points(get(x, "ladder_escape")[..., 0]) == {(3, 6)}


def test_sensibleness_eyes_and_suicide(batch):
    x = planes_of(batch, "eyes")
    sensible = get(x, "sensibleness")[..., 0]
    legal = get(x, "capture_size").sum(-1)
    assert legal[0, 0] == 1 and sensible[0, 0] == 0  # own corner eye
    assert legal[4, 4] == 1 and sensible[4, 4] == 0  # eye with one opponent diagonal in the middle
    assert sensible[4, 7] == 1  # false eye: two opponent diagonals
    assert sensible[8, 4] == 1  # false eye on the edge: one opponent diagonal
    assert legal[8, 8] == 0 and sensible[8, 8] == 0  # suicide
    assert get(x, "liberties_after_move")[8, 8].sum() == 0
    assert legal[0, 8] == 1 and value(x, "capture_size", 0)[0, 8] == 1  # takes O (0,7)


# --- the oracle -----------------------------------------------------------------------------------------------------


def _neighbours(q: int, n: int = N) -> list[int]:
    r, c = divmod(q, n)
    return [
        (r + dr) * n + c + dc for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)) if 0 <= r + dr < n and 0 <= c + dc < n
    ]


def _chain(board, q, n: int = N) -> set[int]:
    seen, stack = {q}, [q]
    while stack:
        for y in _neighbours(stack.pop(), n):
            if board[y] == board[q] and y not in seen:
                seen.add(y)
                stack.append(y)
    return seen


def _liberties(board, chain, n: int = N) -> set[int]:
    return {y for x in chain for y in _neighbours(x, n) if board[y] == 0}


def check_against_oracle(board: list[int], ko: int, x: np.ndarray, n: int = N, where=()) -> None:
    """Liberties, capture size, self-atari and liberties after move of `x` [n·n, planes] against plain Python (a
    flood fill per chain, a copy of the board per move) on `board` (+1 the player to move)."""
    for q in range(n * n):
        libs = len(_liberties(board, _chain(board, q, n), n)) if board[q] else 0
        assert value(x[q], "liberties", 1) == min(libs, 8), (*where, q)
        if board[q] != 0 or q == ko:
            assert x[q, F.PLANE_SLICES["capture_size"].start : F.PLANE_SLICES["sensibleness"].stop].sum() == 0
            continue
        after = list(board)
        after[q] = 1
        for y in _neighbours(q, n):
            if after[y] == -1 and not _liberties(after, _chain(after, y, n), n):
                for z in _chain(after, y, n):
                    after[z] = 0
        chain = _chain(after, q, n)
        libs = len(_liberties(after, chain, n))
        if libs == 0:  # suicide
            assert x[q, F.PLANE_SLICES["capture_size"]].sum() == 0, (*where, q)
            continue
        captured = sum(1 for a, b in zip(board, after) if a == -1 and b == 0)
        assert value(x[q], "capture_size", 0) == min(captured, 7), (*where, q)
        assert value(x[q], "liberties_after_move", 1) == min(libs, 8), (*where, q)
        assert value(x[q], "self_atari_size", 1) == (min(len(chain), 8) if libs == 1 else 0), (*where, q)


def test_chain_and_move_planes_match_an_oracle(batch):
    """The oracle on the 9 pgx positions."""
    for row in batch["pgx"]:
        board = [int(v) for v in np.asarray(batch["positions"].board[row])]
        x = batch["planes"][row].reshape(N * N, -1)
        check_against_oracle(board, int(batch["positions"].ko[row]), x, where=(row,))


def test_19x19_planes_match_the_oracle_across_every_bitset_word():
    """19×19 (361 points: liberty bitsets of 12 words of 32 bits, against 3 on 9×9). A hand-made board: O on the
    whole first column (19 stones), X on the second column but for its two ends, so the O chain's only liberties are
    (0,1) = point 1, in word 0, and (18,1) = point 343, in word 10: 2 liberties (a bitset that lost a word would count
    1). X at either end leaves O one liberty, which the extension at the other end does not add to: the extended chain
    then has (0,2) or (18,2) alone, so both ends are ladder captures; X's move there joins the 17-stone X chain:
    17 + 1 + 1 = 19 liberties after it. Then the oracle on every point of it and of two random games at ply 200."""
    n = 19
    board = np.zeros(n * n, np.int8)
    board[[r * n for r in range(n)]] = -1
    board[[r * n + 1 for r in range(1, n - 1)]] = 1
    env = pgx.make("go_19x19")

    @jax.jit
    def random_game(key):
        def step(state, key):
            mask = state.legal_action_mask.at[-1].set(False)
            return env.step(state, jax.random.categorical(key, jnp.where(mask, 0.0, -jnp.inf))), None

        state = env.init(key)
        return from_pgx(jax.lax.scan(step, state, jax.random.split(key, 200))[0])

    hand = Position(
        board=jnp.asarray(board),
        turns_since=jnp.asarray(np.where(board != 0, 8, 0).astype(np.int8)),
        ko=jnp.int32(-1),
        black_to_move=jnp.bool_(True),
    )
    positions = [hand, random_game(jax.random.key(1)), random_game(jax.random.key(2))]
    for i, p in enumerate(positions):
        x = np.asarray(FEATURES_48(jax.tree.map(lambda a: a[None], p)))[0]  # batch 1: the 19×19 ladder test's program
        if i == 0:
            assert value(x, "liberties", 1)[0, 0] == 2 and value(x, "liberties", 1)[18, 0] == 2
            assert value(x, "capture_size", 0)[0, 1] == 0 and value(x, "liberties_after_move", 1)[0, 1] == 8  # >= 8
            assert points(get(x, "ladder_capture")[..., 0]) == {(0, 1), (18, 1)}
        assert int(np.count_nonzero(np.asarray(p.board))) > 100 or i == 0  # a crowded board, not an empty one
        check_against_oracle([int(v) for v in np.asarray(p.board)], int(p.ko), x.reshape(n * n, -1), n, where=(i,))


# --- batching and plane counts --------------------------------------------------------------------------------------


def test_single_position_equals_its_row_and_ko(batch):
    # unbatched (no leading dims) gives the batch's row; with a ko at (0,5) that capture is illegal
    for name in ("ladder_breaker", "captures"):
        x = np.asarray(FEATURES_48(position(BOARDS[name])))
        assert x.shape == (N, N, 48)
        np.testing.assert_array_equal(x, planes_of(batch, name)[..., :48])
    x = np.asarray(FEATURES_48(position(BOARDS["captures"], ko=5)))
    assert x[0, 5, F.PLANE_SLICES["capture_size"].start :].sum() == 0
    assert value(x, "capture_size", 0)[8, 4] == 3  # the other capture is untouched


def test_batch_order_does_not_matter(batch):
    # the ladder reads of all positions share slots: reversing the batch gives the same planes per position
    reversed_ = jax.tree.map(lambda a: a[::-1], batch["positions"])
    x = np.asarray(FEATURES_49(reversed_))
    np.testing.assert_array_equal(x[::-1], batch["planes"])


def test_first_k_planes_and_leading_dims(batch):
    positions = batch["positions"]
    count = positions.board.shape[0] // 2 * 2
    two_dims = jax.tree.map(lambda a: a[:count].reshape(2, count // 2, *a.shape[1:]), positions)
    for k in (4, 12, 20):
        x = np.asarray(jax.jit(lambda p, k=k: F.features(p, k))(two_dims))
        assert x.shape == (2, count // 2, N, N, k)
        np.testing.assert_array_equal(x.reshape(count, N, N, k), batch["planes"][:count, ..., :k])


@pytest.mark.parametrize("bad", [0, 3, 21, 47, 50])
def test_bad_plane_count(bad):
    with pytest.raises(ValueError, match=r"num_planes must be one of 4, 12, 20, 48, 49") as info:
        F.features(position(BOARDS["ladder"]), bad)
    assert "\n" not in str(info.value)


def test_bfloat16(batch):
    x = jax.jit(lambda p: F.features(p, 20, dtype=jnp.bfloat16))(position(BOARDS["ladder"]))
    assert x.dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(x, np.float32), planes_of(batch, "ladder")[..., :20])


# --- 19×19: a ladder longer than a 9×9 board -----------------------------------------------------------------------


def test_a_19x19_ladder_runs_to_the_edge_and_a_far_breaker_saves_it():
    """O (9,9) has 2 liberties, (10,9) and (9,10); X holds (8,9), (9,8), (10,8). X at (9,10) starts a ladder: O
    extends to (10,9) (liberties (11,9), (10,10)), X plays (11,9), O extends (10,10), and so on down the diagonal, the
    O chain growing along (k,k), (k+1,k) and keeping 2 liberties, until the edge row 18 leaves it 1: captured, 9
    rows from the start, longer than a 9×9 board. X at (10,9) instead lets O extend to (9,10) with 3 liberties ((8,10),
    (9,11), (10,10)): no ladder. An O stone at (16,16), on the ladder's path 7 rows down, joins the chain when it
    arrives there and gives it liberties: the ladder fails, and (9,10) is no ladder capture. (The reference reader of
    experiments/alphago/ladder_reference.py, which reads every line, marks the same points on all three boards.)"""
    n = 19

    def planes(o_stones):
        board = np.zeros(n * n, np.int8)
        for r, c in ((8, 9), (9, 8), (10, 8)):
            board[r * n + c] = 1  # X, the player to move
        for r, c in o_stones:
            board[r * n + c] = -1
        position = Position(
            board=jnp.asarray(board[None]),
            turns_since=jnp.asarray(np.where(board != 0, 8, 0).astype(np.int8)[None]),
            ko=jnp.full((1,), -1, jnp.int32),
            black_to_move=jnp.ones((1,), bool),
        )
        return np.asarray(FEATURES_48(position))[0]

    ladder = planes([(9, 9)])
    assert points(get(ladder, "ladder_capture")[..., 0]) == {(9, 10)}
    broken = planes([(9, 9), (16, 16)])
    assert points(get(broken, "ladder_capture")[..., 0]) == set()
    off_path = planes([(9, 9), (3, 16)])  # an O stone away from the path changes nothing
    assert points(get(off_path, "ladder_capture")[..., 0]) == {(9, 10)}

"""One registry from game name to a pgx environment plus the per-game facts AlphaZero needs.

Length caps are enforced by pgx itself (its `terminated` flag), so self-play only has to read the outcome:
  * chess, shogi: 512 plies -> draw (AlphaZero, Silver et al., Science 2018, supplementary materials); pgx's
    gardner_chess and animal_shogi: 256 -> draw.
  * go: 2·N² plies (722 for 19×19, as in AlphaGo Zero, Methods) -> scored by Tromp-Taylor (rewards from the area count).
  * tic_tac_toe, connect_four, othello, hex: no cap needed; the rules end every game (≤ 9, 42, ~64 with passes, 121).

Dirichlet alpha: AlphaZero sets it "in inverse proportion to the approximate number of legal moves in a typical
position" (chess 0.3, shogi 0.15, Go 0.03). For the games the papers do not cover we use alpha = 10 / L, where L is the
mean number of legal moves under random play printed by experiments/performance/legal_moves.py (the constant 10 is what
the paper implies for chess: 0.3 × ~35 legal moves ≈ 10), clipped to at most 1.0 (alpha > 1 makes the noise nearly
uniform and drowns the prior). Go 9×9 takes the paper's Go value scaled by board area, 0.03 × 361 / 81 ≈ 0.13. Random
play undercounts the legal moves of real games where pieces develop (chess: 22.6 random vs ~35 typical), noted per game.
"""

import dataclasses
from collections.abc import Callable
from typing import Literal

import pgx

from envs import connect_four_board, go_eyes, go_liberties, go_scoring

CapRule = Literal["draw", "scored", "none"]


class UnknownGameError(ValueError):
    """A game name that is not in the registry."""


@dataclasses.dataclass(frozen=True)
class GameSpec:
    """Per-game facts. All fields are static Python values (safe to close over in jitted code)."""

    name: str  # registry name, equal to pgx's env id
    dirichlet_alpha: float  # root noise concentration (see module docstring)
    typical_legal_moves: float  # L used to pick dirichlet_alpha (experiments/performance/legal_moves.py, random play)
    max_length: int  # ply cap enforced by pgx (or the longest possible game where the rules end it)
    cap_rule: CapRule  # what a game at the cap counts as: draw, scored by the rules, or no cap needed
    temperature_moves: int  # plies sampled ∝ visit counts before playing greedily (paper: 30 for Go/chess)
    symmetries: tuple[str, ...] = ()  # board symmetries the rules have (used by the AlphaGo Zero variant)
    opening_plies: int = 4  # random plies that open an evaluation game (see below)
    # The final position's ownership and score margin, for KataGo's auxiliary targets (Config.aux_ownership_weight,
    # aux_score_weight): one unbatched finished pgx state -> (ownership [2, H·W] in {−1, 0, +1}, margin [2] in points),
    # row p from pgx player id p's point of view. None: the game defines neither (Go: envs/go_scoring.py; connect four
    # its final board with no margin: envs/connect_four_board.py).
    final_targets: Callable | None = None
    # Whether final_targets' margin is a score (Go's area count); False: the game has none, the score head is refused
    final_margin: bool = True
    # The most legal moves any position of the game has, where it is far below the action space: the bound that lets
    # a replay row keep only that many policy entries (Config.compact_replay). Chess: 218 (the largest known count in a
    # legal position, each promotion piece a move of its own as in pgx's actions); shogi: 593 (likewise). None: no
    # useful bound (Go's legal moves can fill its action space).
    max_legal_actions: int | None = None
    # Greedy play's check of a pass against the rules' count (Config.pass_check): one unbatched state, the search's
    # move [] and its best move other than pass [] -> the move to play. None: passing never ends the game early (only
    # Go's two passes do: envs/go_scoring.py).
    checked_pass: Callable | None = None
    # The mover's own eyes (Config.eye_rule): one unbatched state -> [A] bool. None: the game has no eyes (Go only).
    own_eyes: Callable | None = None
    # Extra input planes computed from a batch of observations (Config.liberty_planes): [B, H, W, C] -> [B, H, W, k].
    # None: the game has none (Go's chains with 1, 2, 3 liberties: envs/go_liberties.py).
    liberty_planes: Callable | None = None

    def make(self) -> pgx.Env:
        return pgx.make(self.name)


# Symmetries (envs/symmetries.py names them; identity first). A transform is a symmetry when it maps every position
# and move to one with the same rules and the same goal for each player, and fixes the start position:
#   * tic_tac_toe, Go: all 8 of the square's (lines of three, liberties and area scoring do not see orientation).
#   * connect_four: the left–right mirror only (gravity fixes up and down; the 6×7 board has no quarter turns).
#   * othello: the start (d4, e5 one colour; d5, e4 the other) is fixed by the two diagonal reflections and the half
#     turn, not by quarter turns or the horizontal/vertical mirrors (which swap the colours of the centre).
#   * hex: pgx's rhombus has neighbours (r, c±1), (r±1, c), (r+1, c−1), (r−1, c+1); the half turn keeps them and keeps
#     each player's pair of edges (first player rows 0 and N−1, second player columns 0 and N−1). The diagonal
#     reflections keep the neighbours but swap the two players' edges, so they are symmetries only with colours
#     swapped too; the mirrors break adjacency. The swap move (transposing the first stone) commutes with the half turn.
#   * chess, shogi, gardner_chess, animal_shogi: none. No start position is its own mirror image (king and queen,
#     rook and bishop, giraffe and elephant stand on one side), and pawns only move forwards.
D8 = ("identity", "rot90", "rot180", "rot270", "flip_lr", "flip_ud", "transpose", "antitranspose")

# Opening plies: random plies before the players of an evaluation match take over (games 2k and 2k+1 share one
# opening, colours swapped): enough distinct openings for a few hundred games between deterministic players, few enough
# to leave the game balanced. 4 for every game but tic_tac_toe (2).
GAMES: dict[str, GameSpec] = {
    g.name: g
    for g in [
        # L ≈ 5.4 (random play); 10/5.4 = 1.9 -> clipped to 1. A game is at most 9 plies: sample the first 4.
        GameSpec(
            "tic_tac_toe",
            dirichlet_alpha=1.0,
            typical_legal_moves=5.4,
            max_length=9,
            cap_rule="none",
            temperature_moves=4,
            symmetries=D8,
            opening_plies=2,
        ),
        # L ≈ 6.7 -> 10/6.7 = 1.5, clipped to 1.
        GameSpec(
            "connect_four",
            dirichlet_alpha=1.0,
            typical_legal_moves=6.7,
            max_length=42,
            cap_rule="none",
            temperature_moves=8,
            symmetries=("identity", "flip_lr"),
            final_targets=connect_four_board.final_targets,
            final_margin=False,
        ),
        # L ≈ 8.5 -> 10/8.5 = 1.2, clipped to 1.
        GameSpec(
            "othello",
            dirichlet_alpha=1.0,
            typical_legal_moves=8.5,
            max_length=130,
            cap_rule="none",
            temperature_moves=15,
            symmetries=("identity", "rot180", "transpose", "antitranspose"),
        ),
        # L ≈ 68 on 11×11 -> 10/68 ≈ 0.15.
        GameSpec(
            "hex",
            dirichlet_alpha=0.15,
            typical_legal_moves=68.4,
            max_length=121,
            cap_rule="none",
            temperature_moves=15,
            symmetries=("identity", "rot180"),
        ),
        # Random play gives L ≈ 33 (it fills the board unlike real games); we scale the paper's 19×19 value by area.
        GameSpec(
            "go_9x9",
            dirichlet_alpha=0.13,
            typical_legal_moves=33.2,
            max_length=162,
            cap_rule="scored",
            temperature_moves=15,
            symmetries=D8,
            final_targets=go_scoring.final_targets,
            checked_pass=go_scoring.checked_pass,
            own_eyes=go_eyes.own_eyes,
            liberty_planes=go_liberties.liberty_planes,
        ),
        GameSpec(
            "go_19x19",
            dirichlet_alpha=0.03,
            typical_legal_moves=250.0,
            max_length=722,
            cap_rule="scored",
            temperature_moves=30,
            symmetries=D8,
            final_targets=go_scoring.final_targets,
            checked_pass=go_scoring.checked_pass,
            own_eyes=go_eyes.own_eyes,
            liberty_planes=go_liberties.liberty_planes,
        ),
        GameSpec(
            "chess",
            dirichlet_alpha=0.3,
            typical_legal_moves=35.0,
            max_length=512,
            cap_rule="draw",
            temperature_moves=30,
            max_legal_actions=218,
        ),
        # Random play gives L ≈ 9.3; random chess underestimates real chess by 35/22.6, so L ≈ 14 -> 10/14 ≈ 0.7.
        GameSpec(
            "gardner_chess",
            dirichlet_alpha=0.7,
            typical_legal_moves=14.4,
            max_length=256,
            cap_rule="draw",
            temperature_moves=15,
        ),
        GameSpec(
            "shogi",
            dirichlet_alpha=0.15,
            typical_legal_moves=80.0,
            max_length=512,
            cap_rule="draw",
            temperature_moves=30,
            max_legal_actions=593,
        ),
        # L ≈ 6.9 -> 10/6.9 = 1.4, clipped to 1.
        GameSpec(
            "animal_shogi",
            dirichlet_alpha=1.0,
            typical_legal_moves=6.9,
            max_length=256,
            cap_rule="draw",
            temperature_moves=10,
        ),
    ]
}


def game_names() -> list[str]:
    return list(GAMES)


def get_game(name: str) -> GameSpec:
    """Returns the GameSpec for `name`, or raises UnknownGameError naming the allowed games."""
    try:
        return GAMES[name]
    except KeyError:
        raise UnknownGameError(f"unknown game {name!r}; choose one of: {', '.join(GAMES)}") from None


def make_env(name: str) -> tuple[pgx.Env, GameSpec]:
    spec = get_game(name)
    return spec.make(), spec

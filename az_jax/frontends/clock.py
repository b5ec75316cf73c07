"""How long to think about one move, from the clock a controller reports (GTP time_settings / time_left, UCI go
wtime/btime/winc/binc/movestogo/movetime). NOT IN THE PAPERS (AlphaZero searched a fixed time per move: 40 ms in
its training games, 1 minute per move in its matches — Methods); the rule is the usual engines' share of the clock.

    move_budget(remaining_s=60, increment_s=1)          # 60 / 30 + 0.9 = 2.9 s
    move_budget(remaining_s=0, byo_yomi_s=30, byo_yomi_stones=5)   # 30 / 5 − overhead = 5.95 s
"""

import math

EXPECTED_MOVES_LEFT = 30  # moves the remaining main time is shared over when the controller does not say
OVERHEAD_S = 0.05  # kept back per move for the reply to reach the controller
MIN_BUDGET_S = 0.01


def move_budget(
    remaining_s: float | None,
    increment_s: float = 0.0,
    moves_to_go: int | None = None,
    *,
    byo_yomi_s: float = 0.0,
    byo_yomi_stones: int = 0,
    expected_moves_left: int = EXPECTED_MOVES_LEFT,
    overhead_s: float = OVERHEAD_S,
) -> float:
    """Seconds to search for this move; math.inf when there is no clock (`remaining_s` None and no byo-yomi).

    Main time: the remaining time shared over `moves_to_go` (or `expected_moves_left`) moves, plus 90% of the
    increment, never more than the remaining time less the overhead. Canadian byo-yomi (GTP): once main time is spent,
    the period's time shared over its stones. At least MIN_BUDGET_S."""
    if remaining_s is None and byo_yomi_stones <= 0:
        return math.inf
    if remaining_s is not None and remaining_s > 0:
        moves = max(1, moves_to_go if moves_to_go else expected_moves_left)
        budget = remaining_s / moves + 0.9 * max(0.0, increment_s)
        cap = remaining_s - overhead_s
        if byo_yomi_stones > 0:  # main time runs out into byo-yomi: the period is there too
            cap = max(cap, byo_yomi_s / byo_yomi_stones - overhead_s)
        return max(MIN_BUDGET_S, min(budget, cap))
    if byo_yomi_stones > 0:
        return max(MIN_BUDGET_S, byo_yomi_s / byo_yomi_stones - overhead_s)
    return MIN_BUDGET_S

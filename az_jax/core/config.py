"""The typed, closed training config and its presets (AlphaGo Zero, Silver et al., Nature 2017 and AlphaZero, Silver
et al., Science 2018, Methods; values neither paper gives come from AlphaZero's published pseudocode or are marked
NOT IN THE PAPERS).

A Config is frozen: variants are derived with `override(config, ["key=value", ...])` (az_jax/core/overrides.py: the
`--set` strings and config.json) or `dataclasses.replace`, never edited. `Config.validate` checks a config's values
together (az_jax/core/validation.py); unknown keys and invalid values raise ConfigError naming the key and what is
allowed.
"""

import dataclasses
import json
import typing
from typing import Literal

from az_jax.core import search as search_lib
from az_jax.core import validation
from az_jax.core.validation import ConfigError, get_game_or_error
from envs import get_game

__all__ = [
    "Config",
    "ConfigError",
    "get_game_or_error",
    "variant_switches",
    "FIELDS",
    "RESUMABLE_KEYS",
    "keeps_search_value",
]


@dataclasses.dataclass(frozen=True)
class Config:
    # --- what and where ---------------------------------------------------------------------------------------------
    game: str = "connect_four"  # a name from envs.GAMES
    seed: int = 0  # the one seed of the run; every key in the run derives from it
    num_iterations: int = 100  # iterations (S self-play plies + G gradient steps each) to train for
    # --- network (AlphaGo Zero, Methods, "Neural network architecture"; AlphaZero, Methods) --------------------------
    num_blocks: int = 19  # residual blocks after the stem (paper: 19)
    num_channels: int = 256  # filters per 3×3 conv (paper: 256)
    value_hidden: int = 256  # units of the value head's hidden layer (paper: 256)
    # filters of the value head's 1×1 convolution, whose H·W·F outputs feed its hidden layer (AGZ "Neural network
    # architecture": 1). NOT IN THE PAPERS above 1: Leela Chess Zero's value head takes 32 (lczero.org, "Neural
    # network topology"), so the value reads more than one number a point of the trunk's features
    value_head_filters: int = 1
    # filters of the policy head's 1×1 convolution, whose H·W·F outputs feed the dense layer to the move logits (AGZ
    # "Neural network architecture": 2). NOT IN THE PAPERS above 2: KataGo's policy head reads 32 channels a point
    # (Wu 2019, §2), so the policy reads more than two numbers a point of the trunk's features
    policy_head_filters: int = 2
    compute_dtype: Literal["float32", "bfloat16"] = "float32"  # activations/matmuls; params stay float32
    # every k-th residual block pools a third of its channels over the board into per-channel biases (KataGo's global
    # pooling, Wu 2019, §4.1); 0: none (the papers' network)
    global_pooling_every: int = 0
    # Go: the network's input gains three planes, the stones whose chain has 1, 2 and 3 liberties, computed from the
    # observation's stones inside the network (envs/go_liberties.py). NOT IN THE AlphaZero PAPERS (stones alone);
    # KataGo's input features (Wu 2019, Appendix A), as AlphaGo's had liberty planes (Silver et al. 2016, Extended
    # Data Table 2)
    liberty_planes: bool = False
    # the value head's output. "tanh": one unit → tanh, trained by the squared error to z (the papers). "wdl": three
    # logits, the mover's win / draw / loss, the value P(win) − P(loss), trained by the cross-entropy to the target
    # t ∈ [−1, 1] as the distribution (max(t, 0), 1 − |t|, max(−t, 0)) whose mean is t (MuZero's projection of a scalar
    # target onto a categorical support, Schrittwieser et al. 2020, Appendix F, on the support {1, 0, −1}; Leela Chess
    # Zero's and KataGo's value heads predict win / draw / loss or win / loss / no result). NOT IN THE AlphaZero
    # PAPERS: a drawn game's z = 0 is then its own class, not the mean of wins and losses
    value_head: Literal["tanh", "wdl"] = "tanh"
    # recompute each residual block's activations in the backward pass instead of keeping them (jax.checkpoint per
    # block): the same gradients, a fraction of the learner's memory (what the paper presets need on a 16 GB TPU chip)
    remat: bool = False
    # --- search (mctx) -----------------------------------------------------------------------------------------------
    # a search method of az_jax/core/search.py (METHODS): "puct" (AlphaZero, mctx.muzero_policy), "gumbel" (Gumbel
    # MuZero), "alphago" (AlphaGo 2016's selection), or one registered there
    search: str = "puct"
    num_simulations: int = 800  # simulations per move in self-play (paper: 800)
    # games one search handles at a time on a device: each ply searches the device's games in groups of this many, one
    # after the other, and a search tree lives only during its group's search, so the trees' memory is set by it, not
    # by selfplay_batch_size (not in the papers: it fits their 800-simulation trees in a chip's memory); 0: all at once
    search_batch_size: int = 0
    c_init: float = 1.25  # C(s) = log((1 + N + c_base) / c_base) + c_init  (AlphaZero pseudocode)
    c_base: float = 19652.0
    dirichlet_alpha: float = 0.0  # root noise concentration; 0 means the game's value from envs/
    dirichlet_fraction: float = 0.25  # ε: P = (1 − ε) p + ε η at the root, self-play only (AGZ "Self-play")
    temperature_moves: int = -1  # plies sampled ∝ visit counts, then greedy; -1 means the game's value; resumable
    # NOT IN THE PAPERS: the first K plies of every self-play game are uniformly random legal moves (each position is
    # still searched and stored with its search's targets; only the move played is random), so that games start from
    # many openings and self-play cannot settle into one drawn line. 0: off (the papers).
    random_opening_plies: int = 0
    # NOT IN THE PAPERS: from the first learning-rate step on (the optimizer's step count at lr_boundaries[0]) self-play
    # plays this many random plies instead of `random_opening_plies`: more varied positions for the lower rate to fit.
    # 0: no change at the step.
    random_opening_plies_after_rate_step: int = 0
    # NOT IN THE PAPERS: a position played before its game's last random opening ply learns no value (its policy target
    # is kept): its outcome z follows moves chosen at random, not by the players, so it is the result of a random
    # continuation (on connect four the network then valued won positions of 3 stones at −0.08). Needs random openings.
    # The replay buffer keeps a flag a row, so a run cannot change it on resume. Measured on connect four's `hours`
    # preset: the opening's values right, its play 0.005 behind (experiments/strength/README.md §24)
    mask_random_opening_values: bool = False
    # NOT IN THE PAPERS: game forking (KataGo: Wu 2019, arXiv:1902.10565, its self-play's forked games). Each new
    # self-play game, with this probability, starts from a fork of its slot's previous game instead of the initial
    # position: one of that game's positions (uniform among them) after one uniformly random legal move, played on by
    # the search from there. Self-play then also sees positions that strong play reaches after a mistake, each with
    # its own game's outcome (the game it forked from keeps its own). In [0, 1); 0: off (the papers). Self-play keeps
    # a fork candidate a game, so a run cannot change it on resume.
    fork_fraction: float = 0.0
    max_num_considered_actions: int = 16  # Gumbel search only: actions kept by sequential halving
    # Gumbel search only: its monotone transform of the completed Q-values, σ(q̂(a)) = (c_visit + max_b N(b)) ·
    # c_scale · q̂(a) (Danihelka et al. 2022, "Policy improvement by planning with Gumbel", Eq. 8; q̂ rescaled to [0, 1]
    # among the node's children), added to the logits to choose and to train on: a larger c_scale trusts the search's
    # values more than the prior. mctx's values: 0.1 and 50. A search setting only, so a run may change them on resume.
    gumbel_c_scale: float = 0.1
    gumbel_c_visit: float = 50.0
    # Forced playouts and policy target pruning (KataGo: Wu 2019, §3.2), PUCT self-play only: every root child that
    # has been visited gets at least n_forced(c) = sqrt(k · P(c) · Σ N) visits, and the policy target then takes back
    # the visits that PUCT would not have given (children left with one visit are dropped). k = 2 in KataGo; 0 is off.
    forced_playouts_k: float = 0.0
    # The search of greedy play (evaluation, gating, `az-jax play`, Agent.act); "" means `search`. "gumbel" plays the
    # action sequential halving ends on, chosen by the network's logits plus its search's values (Gumbel MuZero §3-4, no
    # Gumbel noise), where PUCT plays the most visited: at a few dozen simulations a win the search has found can still
    # have fewer visits than the prior's favourite
    eval_search: str = ""
    # Go, greedy play outside self-play (evaluation, gating, Agent.act, the engines): a pass is checked against the
    # rules' area count, which is the result if the game ends now (envs/go_scoring.py, `checked_pass`): pass after the
    # opponent's pass when the count is a win, never pass while it is a loss and another move exists. NOT IN THE
    # PAPERS: their opponents were scored by humans or by their own rules' dead-stone removal; under Tromp-Taylor an
    # opponent that passes with dead stones in our area (GNU Go) wins the count unless they are captured. No effect on
    # self-play or on other games
    pass_check: bool = True
    # Go: the player to move's own eyes (every orthogonal neighbour its stone, the diagonals not the opponent's but
    # one inside the board; envs/go_eyes.py) are neither searched nor played: "off", "play" (greedy play outside
    # self-play: evaluation, gating, `az-jax play`, Agent.act, the engines' kept tree) or "always" (self-play's
    # searches too). NOT IN THE PAPERS: Monte Carlo Go programs' playout rule; the papers' networks learn not to fill
    # their eyes from self-play alone
    eye_rule: str = "off"
    # AlphaGo Zero: each network evaluation in the search (root and leaves) sees its position under a random symmetry of
    # the game (envs/symmetries.py)
    search_symmetries: bool = False
    # AlphaGo (Silver et al. 2016, Methods, "Symmetries": its raw network evaluation): greedy play outside self-play
    # (evaluation, gating, `az-jax play`, Agent, the engines) evaluates every position under all the game's symmetries
    # at once and averages them, the policy's probabilities mapped back to the position and the values (the "explicit
    # symmetry ensemble"), at K× the network work (K = 2 on connect four, 8 on Go). Self-play is unchanged
    eval_symmetry_ensemble: bool = False
    # Playout cap randomization (KataGo: Wu, "Accelerating Self-Play Learning in Go", 2019, §3.1): each ply is searched
    # with `num_simulations` (a full search, with root noise) with probability p, else with `fast_simulations` (no
    # root noise); only the fully searched positions are trained on (policy and value), so more games are finished per
    # simulation spent. KataGo: p = 0.25, N = 600, n = 100. The choice is made per ply for the whole batch of games
    # (one search program runs per ply), not per game. 1.0 means off.
    full_search_fraction: float = 1.0
    fast_simulations: int = 0  # n, the fast searches' simulations (0 < n < num_simulations when p < 1)
    # --- self-play ---------------------------------------------------------------------------------------------------
    selfplay_batch_size: int = 1024  # B: games played in parallel (global, split over devices)
    selfplay_steps: int = 32  # S: plies each game advances per iteration
    # --- replay ------------------------------------------------------------------------------------------------------
    replay_capacity: int = 1_000_000  # positions kept (global, split over devices); oldest overwritten first
    # compact replay rows (chess, shogi): a row keeps π's entries for at most the game's most legal moves
    # (GameSpec.max_legal_actions) with their actions, and the legal mask as bits: the same π and mask come back when
    # sampled, in a fraction of the memory (chess: 32.6 instead of 53.9 KB a row, most of it the float observation)
    compact_replay: bool = False
    min_replay_size: int = 4096  # completed positions in the buffer before learning starts
    # λ: the value head learns (1 − λ)·z + λ·v_search, the game's outcome mixed with the root's search value when the
    # position was played. 0 is the papers' z. NOT IN THE PAPERS (z alone, AZ Methods); the mix of z and the search's
    # value is the "averaged target" of A. Prasad, Lessons from AlphaZero part 4 (2018), on connect four. On go_9x9's
    # small preset 0.5 killed the value head within the first training iterations (its 1-filter head's ReLU passes
    # nothing after the first 16 steps at rate 0.02: a constant output, self-play games of ~20 plies, a uniform policy;
    # experiments/go_9x9/README.md); a rate of 0.002 for the first 128 steps kept the head alive: not for Go from
    # scratch without such a start
    value_target_mix: float = 0.0
    # NOT IN THE PAPERS: from the first learning-rate step on (the optimizer's step count at lr_boundaries[0]) the value
    # target's λ becomes this; -1: λ unchanged at the step. 0 trains on z alone after the step (the mix's faster start,
    # the papers' target once the rate drops). Either λ > 0 makes the buffer keep search values; a run may resume
    # with another value here as long as that stays so
    value_target_mix_after_rate_step: float = -1.0
    # Reanalyse (MuZero Reanalyse, Schrittwieser et al. 2021; az_jax/core/reanalyse.py): after each iteration's
    # self-play, the latest network searches k × B stored positions again (k = this, B = selfplay_batch_size; drawn
    # uniformly among those to be trained on) with self-play's search, and their policy targets (and search values,
    # where kept) are replaced: fresher targets for positions trained on again. It costs k/S of self-play's searching,
    # and the replay then keeps each position's game state too (connect four 285 bytes, go_9x9 5.7 KB a row). NOT IN
    # THE AlphaZero PAPERS. 0: off
    reanalyse_batches: int = 0
    # AlphaGo Zero: each sampled training position gets a random symmetry of the game (observation, policy target, legal
    # mask; z unchanged)
    augment_symmetries: bool = False
    # KataGo's auxiliary targets (Wu, "Accelerating Self-Play Learning in Go", 2019, "Auxiliary Ownership and Score
    # Targets"; its ablation: 1.65× less self-play computation to reach the same strength with them), for games that
    # define the final ownership and score (envs/registry.py: Go; connect four its final board, ownership only). Each
    # position also learns, from its mover's point of view, who owns each point of the game's final position (an
    # ownership head: tanh per point) and the final score margin (a score head). 0: no head, no target kept (the
    # papers' network and loss). With `resign` they are learnt from the games played to their end only (a resigned
    # game has no final position; replay.ReplayBuffer.scored).
    # Weight of the ownership loss, the cross-entropy of (1 + o)/2 against (1 + ô)/2 averaged over the board's points.
    # KataGo: 1.5/b² per point summed over the b² points, i.e. 1.5 here
    aux_ownership_weight: float = 0.0
    # Weight of the score loss, the squared error of the predicted margin / (H·W) (a scalar regression of the margin
    # scaled to about [−1, 1], where KataGo predicts a distribution over scores). NOT IN THE PAPERS: KataGo's score
    # weights belong to its distribution losses; a squared error on this scale is comparable to the value loss's
    aux_score_weight: float = 0.0
    # --- learning (AlphaGo Zero, Methods, "Optimisation"; AlphaZero, Methods) ----------------------------------------
    batch_size: int = 4096  # global minibatch (paper: 4096)
    # each device learns its share of the batch in this many equal parts, one after the other, averaging their
    # gradients before the one update (learner.accumulate): the learner's activations are a part's (not in the papers:
    # it fits their batch on a 16 GB chip without bfloat16); batch norm's statistics are then each part's own
    micro_batches: int = 1
    train_ratio: float = 1.0  # positions trained on per position generated (sets G, logged)
    learning_rates: tuple[float, ...] = (0.2, 0.02, 0.002, 0.0002)  # stepped schedule values …
    lr_boundaries: tuple[int, ...] = (100_000, 300_000, 500_000)  # … changing after these gradient steps
    momentum: float = 0.9
    weight_decay: float = 1e-4  # c in l = (z − v)² − πᵀ log p + c‖θ‖²
    # --- host loop ---------------------------------------------------------------------------------------------------
    checkpoint_every: int = 10  # iterations between checkpoints
    keep_checkpoints: int = 3  # the last K checkpoints are kept (0: all, for an Elo ladder over the run)
    eval_every: int = 10  # iterations between evaluations against uniform random (0: never)
    eval_games: int = 200  # games per evaluation, colours alternating
    eval_simulations: int = 0  # simulations per move when evaluating; 0 means num_simulations
    # Fixed baselines of those evaluations: JAX player specs of az_jax/evaluation/players.py (random, mcts:sims=N,
    # run:DIR@STEP), ';'-separated on the command line; logged as eval/vs_<name>_score
    eval_opponents: tuple[str, ...] = ("random",)
    # connect_four only: every evaluation also scores the network on the solver set (az_jax/evaluation/
    # connect_four_solver.py: 1,000 labelled positions), its raw policy and its greedy search at this many
    # simulations; logged as eval/solver_raw, eval/solver_search, eval/solver_search_drawn (shares of optimal moves).
    # 0: off
    eval_solver_simulations: int = 0
    # --- AlphaGo Zero vs AlphaZero (AlphaGo Zero Methods; AlphaZero's list of what it changed) -----------------------
    # `variant` names the algorithm; given to override() (or `--set`, or a preset) it sets gating, resign,
    # augment_symmetries and search_symmetries to its values (VARIANTS), and any of those four given in the same
    # override wins over it. Each switch also works alone, e.g. alphazero + gating for an ablation. Temperature is no
    # switch: both variants play τ = 1 for `temperature_moves` plies then τ → 0 (AGZ "Self-play": 30; the AZ papers
    # give no cut-off and keep AGZ's, so the game's value from envs/ serves both).
    variant: Literal["alphazero", "alphago_zero"] = "alphazero"
    # AGZ "Evaluator": self-play uses the best player so far; every gating interval the latest weights play it and
    # replace it only when they score > threshold
    gating: bool = False
    # Iterations between gating matches; 0 means checkpoint_every (AGZ: each checkpoint, i.e. every 1,000 training
    # steps, is evaluated)
    gating_every: int = 0
    gating_games: int = 400  # games per gating match, random openings paired, colours swapped (AGZ: 400)
    # Simulations per move in gating games, greedy by visits, no noise; 0 means num_simulations (AGZ: 1,600, its self-
    # play budget)
    gating_simulations: int = 0
    # The candidate replaces the best when its score (wins + draws/2) / games is above this (AGZ: "wins by a margin of >
    # 55%"; Go has no draws)
    gating_threshold: float = 0.55
    # AGZ "Self-play": resign when root and best-child values < v_resign (az_jax/core/resign.py); v_resign calibrated on
    # played-out games
    resign: bool = False
    # V_resign before the first calibration. NOT IN THE PAPERS; -0.8 is AlphaGo's resignation value (max Q < -0.8, i.e.
    # < 10% win probability, AlphaGo 2016, Methods)
    v_resign_init: float = -0.8
    resign_disabled_fraction: float = 0.1  # games played out with resignation off to measure false positives (AGZ: 10%)
    resign_target_false_positive: float = 0.05  # v_resign is set to keep the false-positive rate at most this (AGZ: 5%)
    resign_calibration_games: int = 200  # played-out games between re-settings of v_resign. NOT IN THE PAPERS

    # ---------------------------------------------------------------------------------------------------------------
    def validate(self, num_devices: int = 1) -> "Config":
        """Raises ConfigError on the first invalid value for a run on `num_devices` devices (az_jax/core/
        validation.py); returns self so calls chain."""
        validation.check(self, num_devices, tuple(search_lib.METHODS))
        return self

    # --- values derived from the config and the game -------------------------------------------------------------
    @property
    def root_dirichlet_alpha(self) -> float:
        return self.dirichlet_alpha or get_game(self.game).dirichlet_alpha

    @property
    def wdl_value(self) -> bool:
        """Whether the value head gives win/draw/loss logits (`value_head` "wdl") rather than one tanh unit."""
        return self.value_head == "wdl"

    @property
    def acting_search(self) -> str:
        """The search algorithm of greedy play outside self-play."""
        return self.eval_search or self.search

    @property
    def sampling_moves(self) -> int:
        return get_game(self.game).temperature_moves if self.temperature_moves < 0 else self.temperature_moves

    @property
    def train_steps_per_iteration(self) -> int:
        """G = round(train_ratio × B × S × p / batch_size), at least 1: p (full_search_fraction) of the positions are
        trained on."""
        generated = self.selfplay_batch_size * self.selfplay_steps * self.full_search_fraction
        return max(1, round(self.train_ratio * generated / self.batch_size))

    @property
    def aux_targets(self) -> bool:
        """Some auxiliary target (ownership or score) is on."""
        return self.aux_ownership_weight > 0 or self.aux_score_weight > 0

    @property
    def gating_interval(self) -> int:
        return self.gating_every or self.checkpoint_every

    @property
    def switches(self) -> dict[str, bool]:
        """The effective AlphaGo Zero switches, {name: on}."""
        return {key: getattr(self, key) for key in VARIANT_SWITCHES}

    @property
    def positions_per_iteration(self) -> int:
        return self.selfplay_batch_size * self.selfplay_steps

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)


# What each variant sets (AlphaZero, Silver et al., Science 2018: the changes from AlphaGo Zero). Symmetries only
# where the game's rules have some (envs/registry.py), so `variant=alphago_zero` works for chess too (it then has
# none, as AlphaZero's chess).
VARIANT_SWITCHES = ("gating", "resign", "augment_symmetries", "search_symmetries")


def variant_switches(variant: str, game: str) -> dict[str, bool]:
    """The switch values `variant` stands for on `game`."""
    if variant == "alphazero":  # one network, always the latest weights, no augmentation, no resignation
        return dict.fromkeys(VARIANT_SWITCHES, False)
    if variant == "alphago_zero":
        symmetric = bool(get_game_or_error(game).symmetries)
        return {"gating": True, "resign": True, "augment_symmetries": symmetric, "search_symmetries": symmetric}
    raise ConfigError(f"variant must be one of alphazero, alphago_zero, got {variant!r}")


FIELDS = {f.name: f for f in dataclasses.fields(Config)}
_HINTS = typing.get_type_hints(Config)


def keeps_search_value(config: Config) -> bool:
    """Whether the replay buffer keeps each position's root search value (some λ of the value target is > 0)."""
    return config.value_target_mix > 0 or config.value_target_mix_after_rate_step > 0


# Keys that may change when a run is resumed; everything else is fixed by the checkpointed state's shapes or meaning.
# The learning-rate schedule is a function of the optimizer's step count, not state: a run that diverged resumes from
# its last good checkpoint with lower learning_rates (az_jax/runtime/loop.py, DivergenceError). The random openings
# change only which moves self-play plays (the same keys are drawn whenever they are on), so a run may resume with
# more or fewer of them: a schedule of openings over the run. Self-play's simulations per move likewise: no state
# keeps a search tree between plies (each ply's tree is built and dropped inside the step), so a run may resume with
# more simulations for better policy targets late in training (with eval_simulations set, its evaluation games stay
# at the former count). The value target's λ after the rate step too, where the buffer keeps search values either way
# (checkpoint.check_compatible refuses a change of what the buffer keeps).
RESUMABLE_KEYS = frozenset(
    {
        "num_iterations",
        "random_opening_plies",
        "random_opening_plies_after_rate_step",
        "value_target_mix_after_rate_step",
        "num_simulations",
        "temperature_moves",
        "learning_rates",
        "lr_boundaries",
        "checkpoint_every",
        "keep_checkpoints",
        "eval_every",
        "eval_games",
        "eval_simulations",
        "eval_opponents",
        "eval_search",
        "eval_solver_simulations",
        "eval_symmetry_ensemble",
        "gumbel_c_scale",
        "gumbel_c_visit",
    }
)
